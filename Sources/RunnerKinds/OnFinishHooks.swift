import Foundation
import RunnerKit
import Synchronization

/// `--on-finish COMMAND`: a command run with `/bin/sh -c` for each finished job (children
/// included) once its record is durable. The record is on its stdin, one line of JSON;
/// `RUNNER_KEY`, `RUNNER_KIND`, `RUNNER_STATUS`, `RUNNER_URL` and `RUNNER_OUTPUT` (the payload's
/// absolute path, empty without one) are in its environment. At most `concurrency` hooks run at
/// once, each in a process group of its own that is killed after `timeout`. A hook that fails or
/// times out is reported and changes neither the job's status nor the exit code; its stderr is
/// passed on as `<key>: on-finish: <line>`, its stdout discarded.
///
/// Records become durable in batches: before a hook starts, one `syncfs` covers every record
/// written so far (and none when an earlier one already did), unless the run does not sync.
///
/// A hook dies with its runner: a guard in its process group waits on a pipe only the runner
/// holds open and kills the group when the runner is gone (even by SIGKILL).
///
/// A queue's watcher runs the hooks of its jobs itself (`run(record:)`), so that a job is done
/// only once they ended; it then hears nothing as an observer (`observing` false).
package final class OnFinishHooks: RunObserver, Sendable {
    package static let defaultConcurrency = 2
    package static let defaultTimeout: Duration = .seconds(60)

    package let command: String
    private let timeout: Duration
    private let slots: SlotLimiter
    private let store: OutputStore
    private let sync: Bool
    private let report: @Sendable (String) -> Void
    /// Hears of each hook that failed (the event stream, the metrics).
    private let observer: any RunObserver
    private let directory = FileManager.default.currentDirectoryPath
    /// Whether `jobFinished` runs hooks (false: only `run(record:)` does).
    private let observing: Bool

    private struct State {
        var running: [UInt64: Task<Void, Never>] = [:]
        var nextID: UInt64 = 0
        /// Records finished so far, and how many of them a syncfs has covered.
        var finished: UInt64 = 0
        var synced: UInt64 = 0
        var failed = 0
    }
    private let state = Mutex(State())
    /// One syncfs at a time; a hook whose record an earlier one covered runs without its own.
    private let syncing = Mutex(())

    package init(
        command: String, store: OutputStore, concurrency: Int = defaultConcurrency, timeout: Duration = defaultTimeout,
        sync: Bool = true, observer: any RunObserver = SilentObserver(), observing: Bool = true,
        report: @escaping @Sendable (String) -> Void
    ) {
        self.observer = observer
        self.observing = observing
        self.command = command
        self.store = store
        self.timeout = timeout
        self.slots = SlotLimiter(limit: max(1, concurrency))
        self.sync = sync
        self.report = report
    }

    /// Hooks that failed or timed out so far.
    package var failures: Int { state.withLock { $0.failed } }

    package func jobFinished(_ result: JobResult) {
        guard observing else { return }
        schedule(result, line: nil)
    }

    /// Runs the hook for a job whose record `line` a runner that died had written (its file runs
    /// again, the job not): as for a job that finished now, with that record.
    package func replay(record line: [UInt8]) {
        guard let result = JobResult(record: line) else { return }
        schedule(result, line: line)
    }

    /// The hook of a finished job, in a task of its own that waits for a slot (`line`: its
    /// record as written, else made from `result`).
    private func schedule(_ result: JobResult, line: [UInt8]?) {
        state.withLock { state in
            state.finished += 1
            let generation = state.finished
            let id = state.nextID
            state.nextID += 1
            state.running[id] = Task {
                await self.run(result, generation: generation, line: line)
                _ = self.state.withLock { $0.running.removeValue(forKey: id) }
            }
        }
    }

    /// Waits for every hook to end, those that start meanwhile included.
    package func finish() async {
        while let task = state.withLock({ $0.running.values.first }) {
            await task.value
        }
    }

    /// Waits for the hooks of every job finished so far to end (not for those of jobs that
    /// finish meanwhile): what a spool file waits for before it moves on.
    package func settle() async {
        let tasks = state.withLock { Array($0.running.values) }
        for task in tasks { await task.value }
    }

    /// Runs the hook for the job whose record is `line` (one line of JSON, as stored), now, and
    /// returns once it ended; the record is durable already. Whether it succeeded.
    @discardableResult
    package func run(record line: [UInt8]) async -> Bool {
        guard let result = JobResult(record: line) else {
            report("runner: an --on-finish hook did not run: its record is not one: \(Printable.escaped(String(decoding: line.prefix(200), as: UTF8.self)))")
            return false
        }
        let failedBefore = failures
        await run(result, generation: nil, line: line)
        return failures == failedBefore
    }

    /// `generation`: the record's place among those finished, made durable first (nil: it is).
    private func run(_ result: JobResult, generation: UInt64?, line given: [UInt8]? = nil) async {
        do {
            try await slots.acquire()
        } catch {
            return
        }
        defer { slots.release() }
        if sync, let generation, let problem = await makeDurable(upTo: generation) {
            fail(result, "the --on-finish hook for \(result.key) did not run: \(problem)")
            return
        }
        // A record read back (a dead watcher's, a queue row) is checked like any other: the hook
        // gets a path only when it lies inside the output.
        var output = ""
        switch result.output.map({ store.confined(recordOutput: $0) }) {
        case .success(let path): output = path
        case .failure(let refusal):
            let message = "the --on-finish hook for \(result.key) gets no RUNNER_OUTPUT: \(refusal.description)"
            report(Printable.escaped("runner: \(message)"))
            observer.hookNotice(result, message: message)
        case nil: break
        }
        let environment = [
            "RUNNER_KEY": result.key, "RUNNER_KIND": result.kind, "RUNNER_STATUS": result.status.rawValue,
            "RUNNER_URL": result.url ?? "", "RUNNER_OUTPUT": output,
        ]
        let process: KindProcess
        do {
            process = try KindProcess(command: Self.guarded(command), directory: directory, environment: environment, lifeline: true)
        } catch {
            fail(result, "the --on-finish hook for \(result.key) could not start: \(error.description)")
            return
        }
        let line = (given ?? Array(result.jsonLine.utf8)) + [0x0A]
        let key = result.key
        let report = self.report
        let timeout = self.timeout
        // The hook races its timeout; the loser is cancelled (a cancelled hook's group is killed).
        let outcome: KindProcess.Outcome? = await withTaskGroup(of: KindProcess.Outcome?.self) { group in
            group.addTask { await process.run(input: line) { report(Printable.escaped("\(key): on-finish: \($0)")) } }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            if first == nil { _ = await group.next() }
            return first
        }
        guard let outcome else {
            fail(result, "the --on-finish hook for \(key) did not end within \(String(format: "%g", timeout.inSeconds)) s; its process group was killed")
            return
        }
        switch outcome.ending {
        case .exited(0):
            break
        case .exited(let code):
            fail(result, "the --on-finish hook for \(key) exited \(code)" + (outcome.lastErrorLine.map { ": \($0)" } ?? ""))
        case .signalled(let signal):
            fail(result, "the --on-finish hook for \(key) was killed by signal \(signal)")
        }
    }

    /// `command` under `/bin/sh`, beside a guard that kills the hook's process group once the
    /// runner's end of the lifeline (descriptor 3, closed for the command itself) closes.
    static func guarded(_ command: String) -> [String] {
        ["/bin/sh", "-c", #"{ read _ <&3; kill -KILL 0; } & exec 3<&-; exec /bin/sh -c "$1""#, "runner-hook", command]
    }

    private func fail(_ result: JobResult, _ message: String) {
        state.withLock { $0.failed += 1 }
        report(Printable.escaped("runner: \(message)"))
        observer.hookFailed(result, reason: message)
    }

    /// One syncfs covering every record finished so far, unless one already covered `generation`.
    private func makeDurable(upTo generation: UInt64) async -> String? {
        await withCheckedContinuation { continuation in
            BlockingWork.shared.enqueue(on: .syncs) { [self] in
                let problem: String? = syncing.withLock { _ in
                    let target = state.withLock { state -> UInt64? in state.synced >= generation ? nil : state.finished }
                    guard let target else { return nil }
                    do {
                        try store.synchronize()
                    } catch {
                        return "\(error)"
                    }
                    state.withLock { $0.synced = max($0.synced, target) }
                    return nil
                }
                continuation.resume(returning: problem)
            }
        }
    }
}
