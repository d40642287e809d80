import Foundation
import RunnerKit

/// The queue as a live page's source: fleet-wide counts and status, jobs posted queued in one
/// transaction, cancels as `runner cancel KEY --queue`.
///
/// The page's numbers come from a snapshot of the queue that `refreshing(every:clock:)`
/// renews through the store (the watcher runs it beside its feed), so a slow database never
/// holds the page or its event stream: a request reads the last snapshot. Posting a file and
/// cancelling are the database's answers, asked for through the store when they come (the page
/// answers them later and serves the others meanwhile).
final class QueueLiveSource: LiveSource {
    let store: any QueueStore & QueueProducing
    let registry: KindRegistry
    /// This watcher's name in the queue.
    let runner: String

    /// The last snapshot, or why the queue could not be read (nil: not read yet).
    private let snapshot = Locked<Result<QueueProducerStatus, QueueError>?>(nil)

    init(store: any QueueStore & QueueProducing, registry: KindRegistry, runner: String) {
        self.store = store
        self.registry = registry
        self.runner = runner
    }

    /// Reads the queue's status into the snapshot.
    func refresh() async {
        let read: Result<QueueProducerStatus, QueueError>
        do {
            read = .success(try await store.producerStatus())
        } catch {
            read = .failure(error)
        }
        snapshot.withLock { $0 = read }
    }

    /// Renews the snapshot every `interval` until cancelled.
    func refreshing(every interval: Duration, clock: any Clock<Duration>) async {
        repeat {
            await refresh()
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
            return QueueCommands.statusJSON(snapshot.status, display: store.display, now: Date(), scheduled: snapshot.scheduled)
        case .failure(let error):
            return [("queue", .string(store.display)), ("error", .string("\(error)"))]
        case nil:
            return [("queue", .string(store.display)), ("error", .string("the queue was not read yet"))]
        }
    }

    func queue(file path: String, name: String) async throws -> String {
        let registry = registry
        // Read on the blocking work's call lane (a large file is long to read), queued through the store.
        guard let jobs = await BlockingWork.shared.lane(.calls).run({ QueueCommands.submissions(of: path, name: name, registry: registry) }) else {
            throw QueueError("the job file changed while it was being queued; nothing was queued")
        }
        _ = try await store.queueJobs(jobs)
        return name
    }

    func cancel(key: String) async -> LiveServer.Response {
        let outcome: (queued: Int, running: [String])
        do {
            outcome = try await store.cancelJobs(key: key)
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
