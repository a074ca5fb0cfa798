// Controller: builds the ledger and its services and wires them (controller.h).
#include "server/controller.h"

#include <utility>

#include "server/controller_metrics.h"

namespace hachi::server {

Controller::Controller(ControllerOptions options, std::unique_ptr<Ledger> ledger,
                       Authorizer authorizer)
    : options_(std::move(options)),
      authorizer_(std::move(authorizer)),
      ledger_(std::move(ledger)),
      metrics_(std::make_unique<ControllerMetrics>()),
      hub_(options_.clock),
      clocks_(options_.clock) {
  const config::ClusterConfig* config = options_.config ? &*options_.config : nullptr;
  Ledger* l = ledger_.get();
  fleet_ = std::make_unique<Fleet>(l, &hub_, &options_);
  usage_ = std::make_unique<UsageService>(l, config, options_.clock);
  fair_share_ = std::make_unique<FairShareService>(l, fleet_.get(), &options_);
  burn_in_ = std::make_unique<BurnInService>(l, &hub_, config, options_.clock);
  power_ = std::make_unique<PowerService>(
      l, fleet_.get(), &authorizer_, &options_,
      options_.power_programs
          ? options_.power_programs
          : std::shared_ptr<PowerPrograms>(RealPowerPrograms(options_.clock)));
  tokens_ = std::make_unique<TokenService>(l, &authorizer_, options_.clock,
                                           options_.credential_key);
  steps_ = std::make_unique<StepService>(l, fleet_.get(), &hub_, &authorizer_, &options_);
  jobs_ = std::make_unique<JobService>(l, fleet_.get(), &hub_, &authorizer_, &options_);
  nodes_ =
      std::make_unique<NodeService>(l, fleet_.get(), &hub_, steps_.get(), burn_in_.get(),
                                    usage_.get(), &clocks_, &authorizer_, &options_);
  job_views_ =
      std::make_unique<JobViews>(l, fleet_.get(), usage_.get(), power_.get(), &options_);
  cluster_views_ =
      std::make_unique<ClusterViews>(l, fleet_.get(), &hub_, usage_.get(), power_.get(),
                                     &clocks_, metrics_.get(), &options_);
}

Controller::~Controller() { Stop(); }

Result<std::unique_ptr<Controller>> Controller::Create(
    ControllerOptions options, std::unique_ptr<state::Store> store) {
  options.sched.explain = true;  // pending reasons for every job
  if (options.clock == nullptr) options.clock = RealClock();
  if (options.lease <= 0) options.lease = options.agent_timeout;
  if (options.fence_margin < 0) options.fence_margin = 0;
  Result<std::unique_ptr<sched::Scheduler>> scheduler =
      sched::Scheduler::Create(options.sched);
  if (!scheduler.ok()) return scheduler.status();
  Result<Authorizer> authorizer =
      Authorizer::FromConfig(options.config ? &*options.config : nullptr);
  if (!authorizer.ok()) return authorizer.status();
  Result<std::unique_ptr<Ledger>> ledger = Ledger::Open(std::move(store));
  if (!ledger.ok()) return ledger.status();
  std::unique_ptr<Controller> c(
      new Controller(std::move(options), std::move(*ledger), std::move(*authorizer)));
  c->loop_ = std::make_unique<SchedulingLoop>(
      c->ledger_.get(), c->fleet_.get(), &c->hub_, c->nodes_.get(), c->burn_in_.get(),
      c->usage_.get(), c->fair_share_.get(), c->power_.get(), c->metrics_.get(),
      &c->options_, std::move(*scheduler));
  // The write path's observers, in this order: a run's steps end with it (Extend), its
  // usage is written with it (Seal); after an apply, the steps' streams, what users
  // have pending, then the loop's wake-up.
  Ledger& ledger_ref = *c->ledger_;
  ledger_ref.AddObserver(c->steps_.get());
  ledger_ref.AddObserver(c->jobs_.get());
  ledger_ref.AddObserver(c->loop_.get());
  ledger_ref.AddObserver(c->usage_.get());
  ledger_ref.AddObserver(c->fair_share_.get());
  ledger_ref.AddObserver(c->power_.get());
  // Metrics before any thread: the store reports each commit's latency (it knows no
  // metrics), and a scrape asks the views for the gauges.
  ledger_ref.SetCommitObserver(
      [m = c->metrics_.get()](double seconds) { m->store_commit().Observe(seconds); });
  c->metrics_->registry().AddCollector(
      [views = c->cluster_views_.get()](metrics::Writer& w) {
        WriteClusterGauges(views->Gauges(), w);
      });
  // Nothing else runs yet; the lock is taken so the analysis sees the contract kept.
  MutexLock lock(&ledger_ref.mu());
  c->usage_->Held(&ledger_ref);
  c->usage_->ResumeLocked();  // the running jobs' usage so far
  c->fair_share_->Held(&ledger_ref);
  c->fair_share_->LoadLocked();  // the accounts' usage, from the records
  c->jobs_->Held(&ledger_ref);
  c->jobs_->LoadLocked();
  c->fleet_->Held(&ledger_ref);
  HACHI_RETURN_IF_ERROR(c->fleet_->LoadLocked());
  return c;
}

void Controller::Start() { loop_->Start(); }

bool Controller::stopping() const {
  MutexLock lock(&ledger_->mu());
  fleet_->Held(ledger_.get());
  return fleet_->stopping;
}

void Controller::SetNotifier(std::function<void(const std::string&)> notify) {
  hub_.SetNotifier(notify);
  ledger_->SetNotifier(notify);
  steps_->SetNotifier(std::move(notify));
}

void Controller::Stop() {
  {
    MutexLock lock(&ledger_->mu());
    fleet_->Held(ledger_.get());
    fleet_->stopping = true;
    fleet_->loop_cv.SignalAll();
    for (state::JobId id : ledger_->active()) ledger_->NotifyJob(id);
  }
  hub_.Stop();
  if (loop_) loop_->Join();
  usage_->Flush();  // what the running jobs did so far, for the next server
  power_->Flush();  // and the burst nodes' powered spells
}

}  // namespace hachi::server
