extension QueueFeed {
    /// The queue's schedules fired while the feed runs: asleep until the next tick of any
    /// schedule, a notice (a schedule added), or `rescanInterval` for a store that may miss
    /// notices, then every due tick fired. Every watcher does it; the store makes each tick
    /// fire once across the fleet.
    func fireSchedules() async {
        guard let firing = store as? any ScheduleFiring else { return }
        let clock = configuration.engine.clock
        var failing = false
        while !Task.isCancelled && !isStopping {
            var wait: Duration? = firing.pollsForSchedules ? configuration.rescanInterval : nil
            do {
                let (fired, nextIn) = try await firing.fireDueSchedules(runner: runner)
                for tick in fired { onEvent(.scheduleFired(tick)) }
                if let nextIn { wait = min(wait ?? nextIn, max(nextIn, .milliseconds(5))) }
                if failing { onEvent(.problem("the queue's schedules are fired again")) }
                failing = false
            } catch {
                if !failing { onEvent(.problem("the queue's schedules could not be fired (\(error)); trying again every second")) }
                failing = true
                // Tried again every second: a tick that fell due meanwhile fires once it is back.
                wait = firing.pollsForSchedules ? min(configuration.rescanInterval, .seconds(1)) : nil
            }
            let bell = scheduleBell
            guard let wait else {
                await bell.wait()
                continue
            }
            let slept = await withTaskGroup(of: Bool.self) { group in
                group.addTask { (try? await clock.sleep(for: wait)) != nil }
                group.addTask {
                    await bell.wait()
                    return true
                }
                let first = await group.next() ?? false
                group.cancelAll()
                return first
            }
            if !slept { return }
        }
    }
}
