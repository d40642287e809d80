import Foundation
import Glibc

/// What a spool holds now, read from its folders and lock files alone, so it works with or
/// without a watcher running. Data only: the command line renders it.
package struct SpoolStatus: Sendable {
    package struct FinishedFile: Sendable {
        package var name: String
        package var at: Date
        /// For a failed file, the first line of its reason.
        package var reason: String?
    }

    package struct RunningJob: Sendable {
        package var key: String
        package var pid: Int
        package var startedAt: Date
    }

    /// Files waiting in inbox/, oldest first.
    package var queued: [String]
    /// Files claimed by live watchers, by watcher.
    package var claimed: [(watcher: String, files: [String])]
    /// Files left in active/ by watchers that died (the next watcher puts them back in line).
    package var orphaned: Int
    package var running: [RunningJob]
    package var doneCount: Int
    package var failedCount: Int
    package var latestDone: FinishedFile?
    package var latestFailed: FinishedFile?
    package var cancelRequests: [String]

    package static func read(_ spool: Spool) -> SpoolStatus {
        let queued = FileSystem.names(in: spool.inbox).filter(Spool.isCandidate).compactMap { name -> (String, Double)? in
            guard let entry = FileSystem.entry("\(spool.inbox)/\(name)") else { return nil }
            return (name, FileSystem.seconds(entry.changed))
        }.sorted { ($0.1, $0.0) < ($1.1, $1.0) }.map(\.0)

        var claimed: [(String, [String])] = []
        var orphaned = 0
        for name in FileSystem.names(in: spool.active).sorted() where !name.hasPrefix(".") {
            guard FileSystem.entry("\(spool.active)/\(name)")?.type == .directory else {
                orphaned += 1
                continue
            }
            let files = FileSystem.names(in: "\(spool.active)/\(name)").filter { !$0.hasPrefix(".") }.sorted()
            if WatcherLease.isAlive(spool: spool, folder: name) {
                claimed.append((name, files))
            } else {
                orphaned += files.count
            }
        }

        let running = SpoolKeyLock(spool: spool).held()
            .map { RunningJob(key: $0.key, pid: $0.pid, startedAt: $0.startedAt) }
            .sorted { $0.startedAt < $1.startedAt }
        let (doneCount, latestDone) = finished(in: spool.done, reasons: false)
        let (failedCount, latestFailed) = finished(in: spool.failed, reasons: true)
        let cancels = FileSystem.names(in: spool.cancel).filter { !$0.hasPrefix(".") }.compactMap { name in
            // No link, no blocking, 4 KiB at most: a FIFO or a huge file there cannot hang `status`.
            FileSystem.readSmall("\(spool.cancel)/\(name)", cap: 4096).flatMap { String(validating: $0, as: UTF8.self) }?
                .trimmingCharacters(in: .newlines)
        }.sorted()
        return SpoolStatus(
            queued: queued, claimed: claimed, orphaned: orphaned, running: running, doneCount: doneCount,
            failedCount: failedCount, latestDone: latestDone, latestFailed: latestFailed, cancelRequests: cancels)
    }

    private static func finished(in folder: String, reasons: Bool) -> (Int, FinishedFile?) {
        var count = 0
        var latest: (name: String, at: Double)?
        for name in FileSystem.names(in: folder) where Spool.isJobFile(name) {
            guard let entry = FileSystem.entry("\(folder)/\(name)") else { continue }
            count += 1
            let at = FileSystem.seconds(entry.changed)
            if latest == nil || at > latest!.at || (at == latest!.at && name > latest!.name) { latest = (name, at) }
        }
        guard let latest else { return (count, nil) }
        var reason: String?
        if reasons, let bytes = FileSystem.readSmall("\(folder)/\(latest.name)\(Spool.errorSuffix)", cap: 64 * 1024) {
            let text = String(decoding: bytes, as: UTF8.self)
            reason = text.split(separator: "\n").first.map(String.init)
        }
        return (count, FinishedFile(name: latest.name, at: Date(timeIntervalSince1970: latest.at), reason: reason))
    }
}
