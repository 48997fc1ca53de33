#include "reactor/group.h"

#include <pthread.h>
#include <sched.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "common/log.h"

NVMF_LOG_COMPONENT_DECLARE(reactor);

namespace nvmf::reactor {

Result<std::unique_ptr<ReactorGroup>> ReactorGroup::start(const ReactorGroupOpts& opts) noexcept {
  size_t count = opts.cores.empty() ? opts.reactor_count : opts.cores.size();
  if (count == 0) {
    NVMF_ERRLOG(reactor, "reactor group needs at least one reactor (reactor_count or cores)");
    return Unexpected(Errc::invalid_argument, "reactor_count");
  }
  std::unique_ptr<ReactorGroup> group(new (std::nothrow) ReactorGroup());  // setup-path
  if (!group) return Unexpected(Errc::no_memory, "reactor group");
  group->names_.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    group->names_.push_back(std::string(opts.reactor.name) + "." + std::to_string(i));
    ReactorOpts reactor_opts = opts.reactor;
    reactor_opts.name = group->names_.back().c_str();
    auto reactor = Reactor::create(reactor_opts);
    if (!reactor) return Unexpected(reactor.error());
    group->reactors_.push_back(std::move(*reactor));
  }
  for (size_t i = 0; i < count; ++i) {
    Reactor* reactor = group->reactors_[i].get();
    group->threads_.emplace_back([reactor] { reactor->run(); });
    if (!opts.cores.empty()) {
      cpu_set_t set;
      CPU_ZERO(&set);
      int core = opts.cores[i];
      if (core < 0 || core >= CPU_SETSIZE) {
        NVMF_ERRLOG(reactor, "core %d is out of range", core);
        group->stop();
        return Unexpected(Errc::invalid_argument, "cores");
      }
      CPU_SET(core, &set);
      int rc = pthread_setaffinity_np(group->threads_.back().native_handle(), sizeof(set), &set);
      if (rc != 0) {
        NVMF_ERRLOG(reactor, "cannot pin %s to core %d: %s (check the cpuset / --cores)",
                    reactor->name(), core, strerror(rc));
        group->stop();
        return Unexpected(make_system_error(rc, "pthread_setaffinity_np"));
      }
    }
    std::string thread_name = "nvmf_r" + std::to_string(i);  // 15-char limit of pthread names
    pthread_setname_np(group->threads_.back().native_handle(), thread_name.c_str());
  }
  return group;
}

void ReactorGroup::stop() noexcept {
  for (auto& reactor : reactors_) reactor->request_stop();
  for (auto& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
}

ReactorGroup::~ReactorGroup() { stop(); }

}  // namespace nvmf::reactor
