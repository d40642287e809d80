extension QueueFeed {
    /// The queue's schedules fired while the feed runs: asleep until the next tick of any
    /// schedule, or `rescanInterval` (a schedule added meanwhile), then every due tick fired.
    /// Every watcher does it; the store makes each tick fire once across the fleet.
    func fireSchedules() async {
        guard let firing = store as? any ScheduleFiring else { return }
        let clock = configuration.engine.clock
        var failing = false
        while !Task.isCancelled && !isStopping {
            var wait = configuration.rescanInterval
            do {
                let (fired, nextIn) = try await firing.fireDueSchedules(runner: runner)
                for tick in fired { onEvent(.scheduleFired(tick)) }
                if let nextIn { wait = min(wait, max(nextIn, .milliseconds(5))) }
                if failing { onEvent(.problem("the queue's schedules are fired again")) }
                failing = false
            } catch {
                if !failing { onEvent(.problem("the queue's schedules could not be fired (\(error)); trying again every --rescan")) }
                failing = true
            }
            guard (try? await clock.sleep(for: wait)) != nil else { return }
        }
    }
}
