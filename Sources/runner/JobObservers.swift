import RunnerKinds
import RunnerKit

/// What hears the jobs of `runner run`, the spool's watcher and the queue's, built in one place:
/// the command's own reporter first, then the metrics, the event stream (`--events`), the
/// `--on-finish` hooks (which report their own failures to the metrics and the events) and,
/// for a watcher with `--listen`, the live page's observers. A queue's feed runs the hooks of
/// its jobs itself (a job is done only once they ended), so they hear nothing as observers then.
struct JobObservers {
    let events: EventStream?
    let hooks: OnFinishHooks?
    /// Everything above, as the engine's one observer.
    let observer: any RunObserver

    init(
        reporter: any RunObserver, metrics: Metrics?, events target: EngineCommandOptions.EventsTarget?,
        hook: (command: String, concurrency: Int, timeout: Duration)?, store: OutputStore, sync: Bool, live: [any RunObserver] = [],
        hooksRunByFeed: Bool = false
    ) {
        let events = target.map { $0.stream() }
        let hooks = hook.map { hook in
            OnFinishHooks(
                command: hook.command, store: store, concurrency: hook.concurrency, timeout: hook.timeout, sync: sync,
                observer: ObserverFanout((metrics.map { [$0] } ?? []) + (events.map { [$0] } ?? [])), observing: !hooksRunByFeed,
                report: { Console.err($0) })
        }
        let all: [any RunObserver] = [reporter] + (metrics.map { [$0] } ?? []) + (events.map { [$0] } ?? []) + (hooks.map { [$0] } ?? []) + live
        self.events = events
        self.hooks = hooks
        self.observer = all.count == 1 ? reporter : ObserverFanout(all)
    }
}
