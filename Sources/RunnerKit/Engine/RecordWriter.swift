import Foundation
import Dispatch
import Glibc
import Synchronization

/// Writes finished jobs' records and run-log lines, in order, on one queue off the concurrency
/// pool, and knows each key's last result until it is on disk.
///
/// One writer serializes the records (two threads never contend for an ext4 folder's lock); a
/// finishing job does not wait for its turn unless asked or unless the writer is behind
/// (`backlog` records queued), so finished jobs never pile up in memory ahead of their records.
/// A job starting right after another of its key finished reads that one's result from here
/// (`previous(file:)`), not from a record file that is not written yet.
final class RecordWriter: Sendable {
    private let store: OutputStore
    private let runLog: RunLog?
    /// Whether this engine's claims held (`JobEngine.Configuration.claimHeld`): when they did
    /// not, a record in `results/` of an attempt that started later than the one ending now stays.
    private let claimHeld: (@Sendable () -> Bool)?
    private let observer: any RunObserver
    private let queue = DispatchQueue(label: "runner.engine.records")
    private let state = Mutex(State())
    private let pending = Atomic<Int>(0)
    /// The record files that may exist, when the store is this engine's alone: read once at the
    /// start, and each written one added, so a key with no record is not looked for on disk.
    private let known: Locked<RecordNames>?

    private struct State {
        /// Finished jobs not yet taken by a drain, in order.
        var queued: [Queued] = []
        /// The last queued result of each record file, until written.
        var unwritten: [String: (result: JobResult, serial: UInt64)] = [:]
        var serial: UInt64 = 0
        /// Records that met a full disk, tried again before each later batch and at a flush.
        var held: [Queued] = []
    }

    /// A finished job on its way to disk; `file` is its record's file name, or nil for the run
    /// log only. `written` hears the record as one line of JSON once it is written.
    private struct Queued: Sendable {
        var result: JobResult
        var file: String?
        var serial: UInt64
        var written: (@Sendable ([UInt8]) -> Void)?
        /// A record written as it is in place of `result`'s (a parent's, completed with its
        /// children's counts): the observer heard the job end already, with its first record.
        var completed: JSONValue? = nil
    }

    /// Records queued and not yet written, past which a finishing job waits for its own.
    static let backlog = 256

    init(
        store: OutputStore, runLog: RunLog?, observer: any RunObserver, knownRecords: [String]? = nil, claimHeld: (@Sendable () -> Bool)? = nil
    ) {
        self.claimHeld = claimHeld
        self.store = store
        self.runLog = runLog
        self.observer = observer
        self.known = knownRecords.map { Locked(RecordNames($0)) }
    }

    /// The key's last good result: from this writer's queue if it is not written yet, else from
    /// `shared` (the record a queue that several runners share keeps, which may be newer than
    /// the file), else from disk.
    func previous(file: String, shared: JSONValue? = nil) -> PreviousResult? {
        if let unwritten = state.withLock({ $0.unwritten[file]?.result }) {
            return PreviousResult(result: unwritten, store: store) ?? fromDisk(file)
        }
        if let shared, let previous = PreviousResult(record: shared, store: store) { return previous }
        return fromDisk(file)
    }

    private func fromDisk(_ file: String) -> PreviousResult? {
        if let known, !known.withLock({ $0.mayContain(file) }) { return nil }
        return store.readRecord(fileName: file).flatMap { PreviousResult(record: $0, store: store) }
    }

    /// Queues a result's record (`file`, or none for the run log only). With `wait`, or when the
    /// writer is behind, returns once it is written. Returns the record as one line of JSON
    /// when it waited, else nil.
    @discardableResult
    func write(_ result: JobResult, file: String?, wait: Bool) async -> [UInt8]? {
        let queued = pending.add(1, ordering: .relaxed).newValue
        if wait || queued > Self.backlog {
            return await withCheckedContinuation { (continuation: CheckedContinuation<[UInt8], Never>) in
                enqueue(result, file: file, written: { continuation.resume(returning: $0) })
            }
        }
        enqueue(result, file: file, written: nil)
        return nil
    }

    /// Queues a parent's record completed with its children's counts in place of its key's
    /// record (and as the key's last line in the run log), and returns it as one line of JSON
    /// once it is written. Its end was told to the observer with its first record.
    func write(completed record: JSONValue, key: String) async -> [UInt8] {
        guard let result = JobResult(record: Array(JSONWriter.string(record).utf8)) else { return [] }
        pending.add(1, ordering: .relaxed)
        return await withCheckedContinuation { (continuation: CheckedContinuation<[UInt8], Never>) in
            enqueue(
                result, file: OutputStore.recordFileName(forKey: key), written: { continuation.resume(returning: $0) }, completed: record)
        }
    }

    /// The writer is sent for only when the queue was empty: a drain on its way takes this too.
    private func enqueue(_ result: JobResult, file: String?, written: (@Sendable ([UInt8]) -> Void)?, completed: JSONValue? = nil) {
        let wasEmpty = state.withLock { state in
            state.serial += 1
            state.queued.append(Queued(result: result, file: file, serial: state.serial, written: written, completed: completed))
            if let file, completed == nil, result.status != .duplicate { state.unwritten[file] = (result, state.serial) }
            return state.queued.count == 1
        }
        if wasEmpty { queue.async { self.drain() } }
    }

    /// On the writer queue: writes every queued record, in order, then their run-log lines in
    /// one write. Each record is made JSON once: the same line goes to results/, the run log
    /// and whoever waits for it.
    private func drain() {
        let batch = state.withLock { state in
            defer { state.queued.removeAll(keepingCapacity: true) }
            return state.queued
        }
        guard !batch.isEmpty else { return }
        writeHeld(last: false)
        var lines: [UInt8] = []
        var ends: [Int] = []
        var held: [Queued] = []
        lines.reserveCapacity(batch.count * 512)  // a record's line is about 400 bytes: grown rarely, not at every doubling
        ends.reserveCapacity(batch.count)
        for item in batch {
            let start = lines.count
            JSONWriter.write(item.completed ?? item.result.json, into: &lines)
            lines.append(0x0A)
            ends.append(lines.count)
            if let file = item.file, item.completed == nil, let claimHeld, !claimHeld(), isNewer(recordIn: file, than: item.result) {
                // A later attempt of the key (another watcher's, which took the job over) ended
                // already: its record stands; this one goes to the run log and the observer only.
                observer.problem("\(item.result.key): a later attempt of this key ended first; its record in results/ stays")
            } else if let file = item.file {
                do {
                    try store.writeRecord(line: lines[start...], fileName: file)
                    known?.withLock { $0.insert(file) }
                } catch let error as OutputStore.WriteError where Self.mayPass(error) {
                    held.append(item)
                } catch {
                    observer.problem(Self.lost(item, error))
                }
            }
        }
        runLog?.append(lines: lines)
        state.withLock { state in
            for item in batch where !held.contains(where: { $0.serial == item.serial }) {
                if let file = item.file, state.unwritten[file]?.serial == item.serial { state.unwritten[file] = nil }
            }
            state.held.append(contentsOf: held)
        }
        var start = 0
        for (item, end) in zip(batch, ends) {
            if item.completed == nil { observer.jobFinished(item.result) }
            pending.subtract(1, ordering: .relaxed)
            item.written?(Array(lines[start..<(end - 1)]))
            start = end
        }
    }

    /// Whether the record in `results/` named `file` is of an attempt that started after
    /// `result`'s.
    private func isNewer(recordIn file: String, than result: JobResult) -> Bool {
        guard let started = store.readRecord(fileName: file)?["startedAt"]?.stringValue.flatMap(Timestamp.milliseconds) else { return false }
        return started > Int64((result.startedAt.timeIntervalSince1970 * 1000).rounded(.down))
    }

    /// A write that may pass later: the disk was full, and the payload that filled it (the
    /// next job's, streaming while this record waited for the writer) goes away when that job
    /// fails.
    private static func mayPass(_ error: OutputStore.WriteError) -> Bool {
        error.code == ENOSPC || error.code == EDQUOT
    }

    private static func lost(_ item: Queued, _ error: any Error) -> String {
        "\(item.result.key): the result record could not be written: \(error)"
    }

    /// On the writer queue: writes the records a full disk held back, oldest first, each
    /// unless a newer result of its key came since (that one is written in its turn). With
    /// `last`, a record that still does not fit is reported and given up; else it waits for
    /// the next batch.
    private func writeHeld(last: Bool) {
        let held = state.withLock { state in
            defer { state.held.removeAll() }
            return state.held
        }
        guard !held.isEmpty else { return }
        var still: [Queued] = []
        var written: [Queued] = []
        for item in held {
            guard let file = item.file else { continue }
            guard state.withLock({ $0.unwritten[file]?.serial == item.serial }) else { continue }
            do {
                var line: [UInt8] = []
                JSONWriter.write(item.result.json, into: &line)
                line.append(0x0A)
                try store.writeRecord(line: line[...], fileName: file)
                known?.withLock { $0.insert(file) }
                written.append(item)
            } catch let error as OutputStore.WriteError where Self.mayPass(error) && !last {
                still.append(item)
            } catch {
                observer.problem(Self.lost(item, error))
                written.append(item)
            }
        }
        state.withLock { state in
            for item in written {
                if let file = item.file, state.unwritten[file]?.serial == item.serial { state.unwritten[file] = nil }
            }
            state.held.insert(contentsOf: still, at: 0)
        }
    }

    /// Returns once every record queued so far is written; a record a full disk still holds
    /// back is reported then.
    func flush() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async {
                self.writeHeld(last: true)
                continuation.resume()
            }
        }
    }
}

/// A set of record file names that answers "maybe" or "surely not", in a fixed 1 MiB whatever
/// the number of names (one bit per name's hash: a run of 200 000 new keys looks up about 2 % of
/// them in vain, a million about 11 %), so a run of millions of jobs stays flat in memory.
struct RecordNames: Sendable {
    private static let bits = 1 << 23
    private var words = [UInt64](repeating: 0, count: bits / 64)

    init(_ names: some Sequence<String>) {
        for name in names { insert(name) }
    }

    mutating func insert(_ name: String) {
        let bit = Self.bit(name)
        words[bit >> 6] |= 1 << UInt64(bit & 63)
    }

    func mayContain(_ name: String) -> Bool {
        let bit = Self.bit(name)
        return words[bit >> 6] & (1 << UInt64(bit & 63)) != 0
    }

    private static func bit(_ name: String) -> Int { Int(UInt(bitPattern: name.hashValue) % UInt(bits)) }
}
