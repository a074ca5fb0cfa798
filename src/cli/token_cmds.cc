// hachi token create / list / revoke.
#include "cli/token_cmds.h"

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/client.h"
#include "cli/fail.h"
#include "cli/table.h"
#include "core/time_format.h"

namespace hachi::cli {
namespace {

using nlohmann::json;

Result<json> ParseReply(const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return Internal("the server's reply is not JSON");
  return j;
}

}  // namespace

void AddTokenCommands(CLI::App& app, int* exit_code) {
  CLI::App* token = app.add_subcommand("token", "API tokens for the TCP API (admins)");
  token->require_subcommand(1);

  struct CreateFlags {
    std::string server, user;
    bool admin = false;
    int64_t uid = -1, gid = -1;
  };
  auto cf = std::make_shared<CreateFlags>();
  CLI::App* create = token->add_subcommand(
      "create", "Issue a token for USER; it is printed once, on stdout, and never again");
  create->add_option("USER", cf->user, "Whom the token names")->required();
  create->add_flag("--admin", cf->admin,
                   "The bearer is an admin (drain, tokens, any job)");
  create->add_option("--uid", cf->uid,
                     "Their uid (default: the server's password database)");
  create->add_option("--gid", cf->gid, "Their gid (with --uid)");
  create->add_option("--server", cf->server, ServerFlagHelp());
  create->callback([cf, exit_code] {
    Result<std::unique_ptr<ApiClient>> c = ApiClient::Connect(cf->server);
    if (!c.ok()) return void(*exit_code = Fail(c.status()));
    json body{{"user", cf->user}, {"admin", cf->admin}};
    if (cf->uid >= 0) body["uid"] = cf->uid;
    if (cf->gid >= 0) body["gid"] = cf->gid;
    Result<std::string> r = (*c)->Call("POST", "/tokens", body.dump());
    if (!r.ok()) return void(*exit_code = Fail(r.status()));
    Result<json> j = ParseReply(*r);
    if (!j.ok()) return void(*exit_code = Fail(j.status()));
    const json& rec = (*j)["record"];
    // The token alone on stdout, so that it can go straight into a file.
    std::cout << (*j)["token"].get<std::string>() << "\n";
    std::cerr
        << "hachi: token " << rec.value("id", "") << " for " << rec.value("user", "")
        << " (uid " << rec.value("uid", 0) << ", gid " << rec.value("gid", 0) << ")"
        << (rec.value("admin", false) ? ", admin" : "")
        << ". It is shown only now: keep it in ~/.config/hachi/token (mode 0600) or "
           "$HACHI_TOKEN.\n";
  });

  struct ListFlags {
    std::string server;
    bool json = false;
  };
  auto lf = std::make_shared<ListFlags>();
  CLI::App* list = token->add_subcommand("list", "The tokens in use (never their text)");
  list->add_option("--server", lf->server, ServerFlagHelp());
  list->add_flag("--json", lf->json, "JSON");
  list->callback([lf, exit_code] {
    Result<std::unique_ptr<ApiClient>> c = ApiClient::Connect(lf->server);
    if (!c.ok()) return void(*exit_code = Fail(c.status()));
    Result<std::string> r = (*c)->Call("GET", "/tokens");
    if (!r.ok()) return void(*exit_code = Fail(r.status()));
    if (lf->json) {
      std::cout << *r << "\n";
      return;
    }
    Result<json> j = ParseReply(*r);
    if (!j.ok()) return void(*exit_code = Fail(j.status()));
    Table t({{"ID"},
             {"USER"},
             {"UID", Align::kRight},
             {"GID", Align::kRight},
             {"ADMIN"},
             {"CREATED"},
             {"BY"}});
    for (const json& rec : (*j)["tokens"]) {
      t.AddRow({rec.value("id", ""), rec.value("user", ""),
                std::to_string(rec.value("uid", 0)), std::to_string(rec.value("gid", 0)),
                rec.value("admin", false) ? "yes" : "no",
                FormatSlurmLocal(rec.value("created", int64_t{0})),
                rec.value("created_by", "")});
    }
    std::cout << t.Render();
  });

  struct RevokeFlags {
    std::string server, id;
  };
  auto rf = std::make_shared<RevokeFlags>();
  CLI::App* revoke =
      token->add_subcommand("revoke", "Stop a token from working, at once");
  revoke->add_option("ID", rf->id, "The token's id (hachi token list)")->required();
  revoke->add_option("--server", rf->server, ServerFlagHelp());
  revoke->callback([rf, exit_code] {
    Result<std::unique_ptr<ApiClient>> c = ApiClient::Connect(rf->server);
    if (!c.ok()) return void(*exit_code = Fail(c.status()));
    Result<std::string> r = (*c)->Call("DELETE", "/tokens/" + rf->id);
    if (!r.ok()) return void(*exit_code = Fail(r.status()));
    std::cerr << "hachi: token " << rf->id << " revoked\n";
  });
}

}  // namespace hachi::cli
