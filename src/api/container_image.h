// Which container image references a job may name (--container-image), checked by the
// server at submit and again by the agent before it builds the runtime's command line
// (agent/container.h), so that an "image" can never be read as an option of the
// runtime ("--user=0" became docker's flag).
//
// Accepted: what docker, podman and apptainer take as an image: OCI references
// (registry[:port]/path[:tag][@sha256:hex]), apptainer's transports (docker://...,
// library://..., oras://..., docker-archive:...) and local image files (/abs/x.sif,
// ./x.sif), and enroot/pyxis-style "nvcr.io#nvidia/pytorch:24.01-py3". That is: 1-1024
// bytes of letters, digits and . _ - / : @ # + ~ %, starting with a letter, a digit,
// '/' or '.'. Refused: a leading '-' (an option), whitespace, control characters, quotes,
// shell or other punctuation, non-ASCII.
//
// A pure function; thread-safe.
#pragma once

#include <string_view>

#include "core/status.h"

namespace hachi::api {

inline constexpr size_t kMaxContainerImageBytes = 1024;

// Ok for "" (no container) and for an acceptable reference; else kInvalidArgument
// naming the field and the value (escaped, cut at 80 bytes): "container_image: '-x'
// ...".
Status CheckContainerImage(std::string_view image);

}  // namespace hachi::api
