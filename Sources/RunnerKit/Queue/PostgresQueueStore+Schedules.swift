extension PostgresQueueStore: ScheduleFiring {
    package var pollsForSchedules: Bool { true }

    package func fireDueSchedules(runner: String) async throws(QueueError) -> (fired: [Schedule.Fired], nextIn: Duration?) {
        let main = main
        return try await mainThread.run { () throws(QueueError) -> (fired: [Schedule.Fired], nextIn: Duration?) in
            try main.fireDueSchedules(runner: runner)
        }
    }
}
