import Foundation
import RunnerKit

/// The queue as a live page's source: fleet-wide counts and status, jobs posted queued in one
/// transaction, cancels as `runner cancel KEY --queue`.
///
/// The page's numbers come from a snapshot of the queue that `refreshing(every:clock:)`
/// renews off the page's thread (the watcher runs it beside its feed), so a slow database
/// never holds the page or its event stream: a request reads the last snapshot. Posting a file
/// and cancelling are the database's answers, asked for when they come on the blocking work's
/// threads (the page answers them later and serves the others meanwhile).
final class QueueLiveSource: LiveSource {
    let queue: JobQueue
    let registry: KindRegistry
    /// This watcher's name in the queue.
    let runner: String

    private struct Snapshot {
        var status: QueueStatus
        var scheduled: [String: String]
    }
    /// The last snapshot, or why the queue could not be read (nil: not read yet).
    private let snapshot = Locked<Result<Snapshot, QueueError>?>(nil)

    init(queue: JobQueue, registry: KindRegistry, runner: String) {
        self.queue = queue
        self.registry = registry
        self.runner = runner
    }

    /// Reads the queue's status into the snapshot (a blocking call: run where blocking work runs).
    func refresh() {
        let read: Result<Snapshot, QueueError>
        do {
            let status = try queue.status()
            read = .success(Snapshot(status: status, scheduled: (try? queue.scheduleNames(batches: status.batches.map(\.id))) ?? [:]))
        } catch {
            read = .failure(error)
        }
        snapshot.withLock { $0 = read }
    }

    /// Renews the snapshot every `interval` until cancelled.
    func refreshing(every interval: Duration, clock: any Clock<Duration>) async {
        repeat {
            _ = try? await BlockingWork.shared.run(on: .calls) { self.refresh() }
        } while (try? await clock.sleep(for: interval)) != nil
    }

    func overview(runningHere: Int) -> LiveOverview {
        guard case .success(let snapshot) = snapshot.value else { return LiveOverview(counts: [("jobs running here", runningHere)]) }
        let status = snapshot.status
        var counts = [
            ("jobs queued", status.queued), ("jobs running", max(status.running.count, runningHere)), ("running on \(runner)", runningHere),
            ("done, last 24 h", status.done), ("notFound, last 24 h", status.notFound), ("failed, last 24 h", status.failed),
            ("watchers", status.watchers.filter(\.isLive).count),
        ]
        let silent = status.watchers.filter { !$0.isLive }.count
        if silent > 0 { counts.append(("silent watchers", silent)) }
        if status.waiting > 0 { counts.append(("parents waiting", status.waiting)) }
        return LiveOverview(
            counts: counts,
            elsewhere: status.running.filter { $0.runner != runner || $0.phase != nil }.map { ($0.key, $0.runner, $0.startedAt, $0.phase) })
    }

    func status() -> [(key: String, value: JSONValue)] {
        switch snapshot.value {
        case .success(let snapshot):
            return QueueCommands.statusJSON(snapshot.status, display: queue.connection.display, now: Date(), scheduled: snapshot.scheduled)
        case .failure(let error):
            return [("queue", .string(queue.connection.display)), ("error", .string("\(error)"))]
        case nil:
            return [("queue", .string(queue.connection.display)), ("error", .string("the queue was not read yet"))]
        }
    }

    func queue(file path: String, name: String) throws -> String {
        guard let jobs = QueueCommands.submissions(of: path, name: name, registry: registry) else {
            throw QueueError("the job file changed while it was being queued; nothing was queued")
        }
        try queue.submit(jobs)
        return name
    }

    func cancel(key: String) -> LiveServer.Response {
        let outcome: (queued: Int, running: [String])
        do {
            outcome = try queue.cancel(key: key)
        } catch {
            return .json(500, .object([("error", .string("\(error)"))]))
        }
        guard outcome.queued > 0 || !outcome.running.isEmpty else {
            return .json(404, .object([("error", .string("nothing with the key \(key) is running or queued"))]))
        }
        return .json(202, .object([
            ("key", .string(key)), ("running", .bool(!outcome.running.isEmpty)), ("runners", .array(outcome.running.map { .string($0) })),
            ("queuedCancelled", JSONValue(outcome.queued)),
        ]))
    }
}
