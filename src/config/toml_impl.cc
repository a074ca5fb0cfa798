// toml++'s implementation, compiled into hachi_config (see CMakeLists.txt: why not
// Debian's shared library). The other config/ files include toml++ with
// TOML_HEADER_ONLY=0 and so only declare what is defined here.
#define TOML_IMPLEMENTATION
#include <toml++/toml.h>
