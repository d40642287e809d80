import Foundation
import Glibc
import Synchronization

/// One claimed file on its way through the feed: its jobs as the engine takes them, their
/// records beside it, and what decides where it goes when its last job ended.
final class SpoolFile: Sendable {
    let name: String
    /// Where it is while claimed (active/<watcher>/).
    let path: String
    /// Its records, one line per top-level job, under a dot-name until the file is through.
    let resultsPath: String
    /// The records of its jobs that ended under a watcher that died (`Spool.replaySuffix`).
    let replayPath: String
    /// Its status change in inbox/: the rename that put it there.
    let arrived: timespec
    /// Its last write: cancel requests made after it apply to its jobs.
    let written: timespec
    private let jobs = Mutex<AnyIterator<JobDescriptor>?>(nil)
    private let tally = Mutex(Tally())
    /// Records from `replayPath` not yet given to a job, by key, oldest first.
    private let replay = Mutex<[String: [[UInt8]]]>([:])

    struct Tally {
        var feed: BatchFeed?
        var results: Int32 = -1
        var counts: [JobStatus: Int] = [:]
        /// The first reasons of jobs that did not succeed.
        var failures: [String] = []
        /// Jobs taken by the engine, and those not ended yet.
        var taken = 0
        var outstanding = 0
        /// No job is left to take.
        var exhausted = false
        /// Jobs were left untaken (shutdown): the file goes back to inbox/.
        var interrupted = false
        var finishing = false
        var firstStart: timespec?
    }

    init(name: String, folder: String, arrived: timespec, written: timespec) {
        self.name = name
        self.path = "\(folder)/\(name)"
        self.resultsPath = "\(folder)/.\(name)\(Spool.resultsSuffix)"
        self.replayPath = "\(folder)/.\(name)\(Spool.replaySuffix)"
        self.arrived = arrived
        self.written = written
    }

    /// The validated jobs, for the engine to take.
    func setJobs(_ feed: BatchFeed) {
        jobs.withLock { $0 = feed.makeIterator() }
        tally.withLock { $0.feed = feed }
    }

    /// Opens the records file; the reason when it cannot.
    func openResults(mode: mode_t) -> String? {
        let fd = Glibc.open(resultsPath, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW, mode)
        guard fd >= 0 else { return "cannot write \(resultsPath): \(String(cString: strerror(errno)))" }
        _ = fchmod(fd, mode)
        tally.withLock { $0.results = fd }
        return nil
    }

    /// Reads the records a watcher that died left for this file; how many.
    func loadReplay() -> Int {
        guard let bytes = OutputStore.readFile(in: AT_FDCWD, replayPath) else { return 0 }
        var found: [String: [[UInt8]]] = [:]
        var count = 0
        for line in bytes.split(separator: 0x0A) where !line.isEmpty {
            guard let key = (try? JSONParser.parse(Array(line)))?["key"]?.stringValue else { continue }
            found[key, default: []].append(Array(line))
            count += 1
        }
        replay.withLock { $0 = found }
        return count
    }

    /// The record a job of `key` had when its file ran under a watcher that died (taken: the
    /// next job of the key gets the next one); nil when it had none.
    func replayed(key: String) -> [UInt8]? {
        replay.withLock { replay in
            guard var lines = replay[key], !lines.isEmpty else { return nil }
            let line = lines.removeFirst()
            replay[key] = lines.isEmpty ? nil : lines
            return line
        }
    }

    /// The next job to run, counted as running; nil when none is left.
    func takeJob() -> JobDescriptor? {
        guard let job = jobs.withLock({ $0?.next() }) else { return nil }
        tally.withLock { tally in
            tally.taken += 1
            tally.outstanding += 1
        }
        return job
    }

    /// No job is left; returns whether the file is through (it is the caller's to finish).
    func exhaust() -> Bool { tally.withLock { $0.exhausted = true; return Self.through(&$0) } }

    /// Shutdown: jobs were left untaken, so the file goes back to inbox/ once its running jobs
    /// end. Returns whether it is through now.
    func interrupt() -> Bool { tally.withLock { $0.interrupted = true; return Self.through(&$0) } }

    /// Shutdown, for a file the engine is not taking from: through if no job was left after all,
    /// else interrupted. Returns whether it is through now.
    func stopTaking() -> Bool {
        let left = jobs.withLock { $0?.next() } != nil
        return tally.withLock { tally in
            if left { tally.interrupted = true } else { tally.exhausted = true }
            return Self.through(&tally)
        }
    }

    func markStarted() {
        let now = FileSystem.now()
        tally.withLock { if $0.firstStart == nil { $0.firstStart = now } }
    }

    /// A job ended: its record goes beside the file. Returns whether the file is through.
    func jobEnded(_ end: FeedJob.End) -> Bool {
        tally.withLock { tally in
            tally.outstanding -= 1
            switch end {
            case .notStarted:
                tally.interrupted = true
            case .recorded(let result, var line):
                line.append(0x0A)
                let fd = tally.results
                _ = line.withUnsafeBytes { Glibc.write(fd, $0.baseAddress!, $0.count) }
                tally.counts[result.status, default: 0] += 1
                if !result.status.isSuccess, tally.failures.count < 20 {
                    tally.failures.append("\(result.key): \(Self.outcome(of: result))")
                }
            }
            return Self.through(&tally)
        }
    }

    /// A job's status and why, without saying the status twice (`cancelled`, not
    /// `cancelled: cancelled`).
    static func outcome(of result: JobResult) -> String {
        let status = result.status.rawValue
        guard let error = result.error, !error.isEmpty else { return status }
        return error.hasPrefix(status) ? error : "\(status): \(error)"
    }

    private static func through(_ tally: inout Tally) -> Bool {
        guard tally.outstanding == 0, tally.exhausted || tally.interrupted, !tally.finishing else { return false }
        tally.finishing = true
        return true
    }

    /// What its jobs came to; the records file is closed (and, `durable`, synced first).
    func close(durable: Bool) -> (tally: Tally, synced: Bool) {
        tally.withLock { tally in
            var synced = true
            if tally.results >= 0 {
                if durable { synced = fsync(tally.results) == 0 }
                Glibc.close(tally.results)
                tally.results = -1
            }
            return (tally, synced)
        }
    }

    var startLatency: Duration? {
        tally.withLock { $0.firstStart }.map { start in
            let nanoseconds = (Int64(start.tv_sec) - Int64(arrived.tv_sec)) * 1_000_000_000 + Int64(start.tv_nsec - arrived.tv_nsec)
            return .nanoseconds(max(0, nanoseconds))
        }
    }
}

extension SpoolFeed {
    /// A file's last job ended (or it was left on shutdown): it goes to done/, failed/ or back to
    /// inbox/.
    func finish(_ file: SpoolFile) async {
        let name = file.name
        // Children's records are queued without waiting: all on disk before the file is through.
        await engine.flush()
        let (tally, resultsSynced) = file.close(durable: configuration.durable)
        var interrupted = tally.interrupted
        if isHardStopped, tally.counts[.cancelled, default: 0] > 0 { interrupted = true }
        if interrupted {
            unlink(file.resultsPath)
            return await finish(file, outcome: .returned, counts: tally.counts, reason: nil, results: nil)
        }
        await configuration.beforeMove?()
        let jobCount = tally.taken
        if let first = tally.feed?.changes.first {
            let reason = "\(name) changed while it was being read, after it had been validated (\(first)); "
                + "the \(jobCount) job\(jobCount == 1 ? "" : "s") that still read ran (records beside this file): "
                + "write job files elsewhere and rename them into inbox/, then submit it again"
            return await finish(file, outcome: .failed, counts: tally.counts, reason: reason, results: file.resultsPath)
        }
        // A file reaches done/ only once its payloads and records are on disk: one syncfs of the
        // output directory's file system, and the records beside the file.
        if configuration.durable {
            var failure = resultsSynced ? nil : "\(file.resultsPath): \(String(cString: strerror(errno)))"
            do {
                try engine.store.synchronize()
            } catch {
                failure = failure ?? error.description
            }
            if let failure {
                let reason = "the payloads and records of \(name) could not be made durable (\(failure)); "
                    + "its jobs ran (records beside this file): check the disk, then submit it again"
                return await finish(file, outcome: .failed, counts: tally.counts, reason: reason, results: file.resultsPath)
            }
        }
        let bad = tally.counts.filter { !$0.key.isSuccess }.values.reduce(0, +)
        if bad == 0 {
            return await finish(file, outcome: .done, counts: tally.counts, reason: nil, results: file.resultsPath)
        }
        var reason = "\(bad) of \(jobCount) job\(jobCount == 1 ? "" : "s") did not succeed (\(tally.failures.first ?? "")):\n"
            + tally.failures.joined(separator: "\n")
        if bad > tally.failures.count { reason += "\n… and \(bad - tally.failures.count) more (every record is in \(name)\(Spool.resultsSuffix))" }
        await finish(file, outcome: .failed, counts: tally.counts, reason: reason, results: file.resultsPath)
    }

    /// A file that never ran: junk or invalid (`failed`), or not openable (`returned`).
    func finish(_ file: SpoolFile, outcome: FileReport.Outcome, reason: String) async {
        _ = file.close(durable: false)
        unlink(file.resultsPath)
        await finish(file, outcome: outcome, counts: [:], reason: reason, results: nil)
    }

    /// Moves the file and reports it.
    private func finish(
        _ file: SpoolFile, outcome: FileReport.Outcome, counts: [JobStatus: Int], reason: String?, results: String?
    ) async {
        let report = move(file, results: results, outcome: outcome, counts: counts, reason: reason)
        unlink(file.replayPath)
        fileEnded(file, outcome: report.outcome)
        onEvent(.finished(report))
    }

    /// Why a claimed file cannot be run, or nil when it holds valid jobs (then handed to `file`).
    func junkReason(_ file: SpoolFile) -> String? {
        let (name, path) = (file.name, file.path)
        guard let entry = FileSystem.entry(path) else { return "\(name): vanished from \(configuration.spool.active)" }
        switch entry.type {
        case .directory: return "\(name): is a directory, not a job file"
        case .symlink: return "\(name): is a symbolic link; the spool takes regular files only (rename the file itself into inbox/)"
        case .other: return "\(name): is not a regular file"
        case .regular: break
        }
        if entry.size > configuration.maxDocumentBytes, !JobFileFormat.isJSONLines(name: name) {
            return "\(name): is \(entry.size) bytes, more than the spool takes in one JSON document (\(configuration.maxDocumentBytes)); write large batches as JSON Lines (.jsonl)"
        }
        let feed = BatchFeed(files: [path], registry: configuration.engine.registry, limits: configuration.engine.limits)
        let report = feed.validate()
        guard report.errors.isEmpty else {
            return report.errors.map { error in
                let text = error.description
                return text.hasPrefix(path) ? name + text.dropFirst(path.count) : text
            }.joined(separator: "\n")
        }
        file.setJobs(feed)
        return nil
    }

    /// Moves the file (and its records) where its outcome says; the records go first, so a file
    /// is never in done/ without them.
    private func move(
        _ file: SpoolFile, results: String?, outcome: FileReport.Outcome, counts: [JobStatus: Int], reason: String?
    ) -> FileReport {
        let spool = configuration.spool
        let (name, path) = (file.name, file.path)
        var finalName = name
        var outcome = outcome
        do {
            switch outcome {
            case .returned:
                finalName = try FileSystem.moveKeepingBoth(path, into: spool.inbox, name: name)
            case .done, .failed:
                let folder = outcome == .done ? spool.done : spool.failed
                let beside = [Spool.resultsSuffix, Spool.errorSuffix]
                finalName = try reserveName(name, in: folder, beside: beside)
                if let results { try FileSystem.moveNoReplace(results, to: "\(folder)/\(finalName)\(Spool.resultsSuffix)") }
                if let reason {
                    try FileSystem.writeAtomically(Array((reason + "\n").utf8), to: "\(folder)/\(finalName)\(Spool.errorSuffix)", mode: spool.fileMode)
                }
                try FileSystem.moveNoReplace(path, to: "\(folder)/\(finalName)")
            }
            // Durable before it is reported: the folder the file went to, and the one it left.
            if configuration.durable {
                try syncFolder(outcome == .returned ? spool.inbox : outcome == .done ? spool.done : spool.failed)
                try syncFolder((path as NSString).deletingLastPathComponent)
            }
        } catch {
            onEvent(.problem("\(name): could not be moved out of \(spool.active): \(error); it goes back to inbox/"))
            if let results { unlink(results) }
            finalName = (try? FileSystem.moveKeepingBoth(path, into: spool.inbox, name: name)) ?? name
            outcome = .returned
        }
        return FileReport(
            name: name, finalName: finalName, outcome: outcome, counts: counts,
            reason: reason.map { String($0.split(separator: "\n", maxSplits: 5).prefix(5).joined(separator: "\n")) },
            startLatency: file.startLatency)
    }

    private func syncFolder(_ path: String) throws(FileSystem.Failure) {
        do {
            try Durability.syncFolder(path)
        } catch {
            throw FileSystem.Failure(path: path, reason: "fsync: \(String(cString: strerror(error.code)))", code: error.code)
        }
    }

    /// Moves a file whose name is not UTF-8 (the bytes `raw`) from inbox/ to failed/ under a
    /// name made of its valid parts and a hash of the bytes, with the reason beside it.
    func quarantine(_ raw: [UInt8]) {
        let spool = configuration.spool
        let readable = String(decoding: raw, as: UTF8.self).map { $0 == "\u{FFFD}" || $0 == "/" ? "_" : String($0) }.joined()
        let hex = raw.map { String(format: "%02x", $0) }.joined()
        let stem = readable.lastIndex(of: ".").map { readable[..<$0] } ?? Substring(readable)
        let safe = "\(stem.prefix(100))-\(SHA256.hex(raw).prefix(10))\(readable.dropFirst(stem.count))"
        do {
            let finalName = try reserveName(safe, in: spool.failed, beside: [Spool.resultsSuffix, Spool.errorSuffix])
            let reason = "the file's name in inbox/ is not UTF-8 (bytes \(hex)); renamed to \(finalName): name job files in UTF-8"
            try FileSystem.writeAtomically(Array((reason + "\n").utf8), to: "\(spool.failed)/\(finalName)\(Spool.errorSuffix)", mode: spool.fileMode)
            try FileSystem.moveNoReplace(raw: raw, in: spool.inbox, to: "\(spool.failed)/\(finalName)")
            if configuration.durable { try syncFolder(spool.failed) }
            if configuration.durable { try syncFolder(spool.inbox) }
            noteFailedFile()
            onEvent(.finished(FileReport(name: finalName, finalName: finalName, outcome: .failed, counts: [:], reason: reason, startLatency: nil)))
        } catch {
            onEvent(.problem("a file in \(spool.inbox) whose name is not UTF-8 (bytes \(hex)) could not be moved to failed/: \(error)"))
        }
    }

    /// A name free in `folder` together with the files beside it.
    private func reserveName(_ name: String, in folder: String, beside suffixes: [String]) throws(FileSystem.Failure) -> String {
        var n = 1
        while true {
            let candidate = FileSystem.numbered(name, n)
            n += 1
            if FileSystem.entry("\(folder)/\(candidate)") == nil,
                !suffixes.contains(where: { FileSystem.entry("\(folder)/\(candidate)\($0)") != nil })
            {
                return candidate
            }
            if n > 10_000 { throw FileSystem.Failure("\(folder)/\(name)", code: EEXIST) }
        }
    }
}
