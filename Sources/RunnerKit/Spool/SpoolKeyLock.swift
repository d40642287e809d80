import Foundation
import Glibc

/// The spool's key locks: one `flock` per key under `spool/locks/`, so that one key never runs
/// in two watchers that share the spool.
package typealias SpoolKeyLock = FolderKeyLock

extension FolderKeyLock {
    /// The locks of `spool`'s `locks/` folder.
    package init(spool: Spool) {
        self.init(folder: spool.locks, mode: spool.fileMode)
    }

    /// The keys held now by live processes, with when each started, read from the lock files.
    package func held() -> [(key: String, pid: Int, startedAt: Date)] {
        FileSystem.names(in: folder).compactMap { name in
            guard !name.hasPrefix("."), let data = FileSystem.readSmall("\(folder)/\(name)", cap: 4096),
                let value = try? JSONParser.parse(data),
                let key = value["key"]?.stringValue, let pid = value["pid"]?.intValue, let ms = value["startedAtMs"]?.intValue,
                kill(pid_t(pid), 0) == 0 || errno == EPERM
            else { return nil }
            return (key, pid, Date(timeIntervalSince1970: Double(ms) / 1000))
        }
    }
}
