import Foundation
import Glibc
import Synchronization

/// One claimed file on its way through the watcher: when it arrived, when its first job started.
final class FileProgress: Sendable {
    let name: String
    /// Its status change in inbox/: the rename that put it there.
    let arrived: timespec
    /// Its last write: cancel requests made after it apply to its jobs.
    let written: timespec
    private let firstStart = Mutex<timespec?>(nil)

    init(name: String, arrived: timespec, written: timespec) {
        self.name = name
        self.arrived = arrived
        self.written = written
    }

    func markStarted() {
        let now = FileSystem.now()
        firstStart.withLock { if $0 == nil { $0 = now } }
    }

    var startLatency: Duration? {
        firstStart.withLock { $0 }.map { start in
            let nanoseconds = (Int64(start.tv_sec) - Int64(arrived.tv_sec)) * 1_000_000_000 + Int64(start.tv_nsec - arrived.tv_nsec)
            return .nanoseconds(max(0, nanoseconds))
        }
    }
}

extension SpoolWatcher {
    /// Checks, validates and runs one claimed file, then moves it to done/, failed/ or back to inbox/.
    func process(_ progress: FileProgress, in lease: WatcherLease) async -> FileReport {
        let name = progress.name
        let path = "\(lease.folder)/\(name)"
        let feed = BatchFeed(files: [path], registry: configuration.registry, limits: configuration.limits)
        if let reason = junkReason(path: path, name: name, feed: feed) {
            return finish(progress, path: path, results: nil, outcome: .failed, counts: [:], reason: reason)
        }

        let resultsPath = "\(lease.folder)/.\(name)\(Spool.resultsSuffix)"
        let results = open(resultsPath, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW, configuration.spool.fileMode)
        if results >= 0 { _ = fchmod(results, configuration.spool.fileMode) }
        guard results >= 0 else {
            return finish(progress, path: path, results: nil, outcome: .returned, counts: [:], reason: "cannot write \(resultsPath)")
        }
        let tally = Mutex<(counts: [JobStatus: Int], failures: [String], jobs: Int, interrupted: Bool)>(([:], [], 0, false))
        let record = { @Sendable (result: JobResult) in
            var line = JSONWriter.data(result.json)
            line.append(0x0A)
            _ = line.withUnsafeBytes { Glibc.write(results, $0.baseAddress!, $0.count) }
            tally.withLock { tally in
                tally.counts[result.status, default: 0] += 1
                if !result.status.isSuccess, tally.failures.count < 20 {
                    tally.failures.append("\(result.key): \(result.status.rawValue)" + (result.error.map { ": \($0)" } ?? ""))
                }
            }
        }

        let window = max(1, configuration.engine.concurrency)
        let jobs = feed.makeIterator()
        await withTaskGroup(of: JobResult.self) { group in
            var running = 0
            // A line that no longer validates (the file changed under the watcher) is not run,
            // and the feed lists it; the file then fails (below).
            while let job = jobs.next() {
                if isDraining {
                    tally.withLock { $0.interrupted = true }
                    break
                }
                tally.withLock { $0.jobs += 1 }
                if running >= window, let result = await group.next() {
                    running -= 1
                    record(result)
                }
                if isCancelled(key: job.key, written: progress.written) {
                    record(cancelledBeforeStart(job))
                    continue
                }
                awaitStart(key: job.key, progress: progress)
                running += 1
                group.addTask {
                    let result = await self.engine.run(job)
                    self.forgetStart(key: job.key, progress: progress)
                    return result
                }
            }
            for await result in group { record(result) }
        }
        let resultsSynced = !configuration.durable || fsync(results) == 0
        close(results)

        var (counts, failures, jobCount, interrupted) = tally.withLock { $0 }
        let changed = feed.changes.map(\.description)
        if isHardStopped, counts[.cancelled, default: 0] > 0 { interrupted = true }
        if interrupted {
            unlink(resultsPath)
            return finish(progress, path: path, results: nil, outcome: .returned, counts: counts, reason: nil)
        }
        if let first = changed.first {
            let reason = "\(name) changed while it was being read, after it had been validated (\(first)); "
                + "the \(jobCount) job\(jobCount == 1 ? "" : "s") that still read ran (records beside this file): "
                + "write job files elsewhere and rename them into inbox/, then submit it again"
            return finish(progress, path: path, results: resultsPath, outcome: .failed, counts: counts, reason: reason)
        }
        // A file reaches done/ only once its payloads and records are on disk: one syncfs of the
        // output directory's file system, and the records beside the file.
        if configuration.durable {
            var failure = resultsSynced ? nil : "\(resultsPath): \(String(cString: strerror(errno)))"
            do {
                try engine.configuration.store.synchronize()
            } catch {
                failure = failure ?? error.description
            }
            if let failure {
                let reason = "the payloads and records of \(name) could not be made durable (\(failure)); "
                    + "its jobs ran (records beside this file): check the disk, then submit it again"
                return finish(progress, path: path, results: resultsPath, outcome: .failed, counts: counts, reason: reason)
            }
        }
        let bad = counts.filter { !$0.key.isSuccess }.values.reduce(0, +)
        if bad == 0 {
            return finish(progress, path: path, results: resultsPath, outcome: .done, counts: counts, reason: nil)
        }
        var reason = "\(bad) of \(jobCount) job\(jobCount == 1 ? "" : "s") did not succeed (\(failures.first ?? "")):\n" + failures.joined(separator: "\n")
        if bad > failures.count { reason += "\n… and \(bad - failures.count) more (every record is in \(name)\(Spool.resultsSuffix))" }
        return finish(progress, path: path, results: resultsPath, outcome: .failed, counts: counts, reason: reason)
    }

    /// Why a claimed file cannot be run, or nil when it holds valid jobs.
    private func junkReason(path: String, name: String, feed: BatchFeed) -> String? {
        guard let entry = FileSystem.entry(path) else { return "\(name): vanished from \(configuration.spool.active)" }
        switch entry.type {
        case .directory: return "\(name): is a directory, not a job file"
        case .symlink: return "\(name): is a symbolic link; the spool takes regular files only (rename the file itself into inbox/)"
        case .other: return "\(name): is not a regular file"
        case .regular: break
        }
        let lower = name.lowercased()
        if entry.size > configuration.maxDocumentBytes, !lower.hasSuffix(".jsonl"), !lower.hasSuffix(".ndjson") {
            return "\(name): is \(entry.size) bytes, more than the spool takes in one JSON document (\(configuration.maxDocumentBytes)); write large batches as JSON Lines (.jsonl)"
        }
        let report = feed.validate()
        guard !report.errors.isEmpty else { return nil }
        return report.errors.map { error in
            let text = error.description
            return text.hasPrefix(path) ? name + text.dropFirst(path.count) : text
        }.joined(separator: "\n")
    }

    /// A job whose key a cancel request named before it started: recorded, never run.
    private func cancelledBeforeStart(_ job: JobDescriptor) -> JobResult {
        let now = Date()
        let result = JobResult(
            key: job.key, kind: job.kindName, url: job.recordURL, status: .cancelled, error: "cancelled by request before it started",
            startedAt: now, finishedAt: now, parent: job.parent)
        try? engine.configuration.store.writeRecord(result)
        engine.configuration.runLog?.append(result)
        return result
    }

    /// Moves the file (and its records) where its outcome says; the records go first, so a file
    /// is never in done/ without them.
    private func finish(
        _ progress: FileProgress, path: String, results: String?, outcome: FileReport.Outcome,
        counts: [JobStatus: Int], reason: String?
    ) -> FileReport {
        let spool = configuration.spool
        let name = progress.name
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
            startLatency: progress.startLatency)
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
