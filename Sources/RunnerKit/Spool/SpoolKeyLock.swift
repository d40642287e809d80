import Foundation
import Glibc

/// One `flock` per key under `spool/locks/`, so that one key never runs in two processes that
/// share the spool. The kernel frees a lock when its holder dies, so a `kill -9` leaves no
/// stale lock, only a file the next holder reuses.
///
/// A lock file lives only while it is held: the holder writes who holds it (for `runner
/// status`), and removes it before it lets go. One who opened the file just before it was removed
/// would lock a file nobody else can find, so a taker checks after locking that the path still
/// names the file it locked, and tries again if not.
public struct SpoolKeyLock: KeyLocking {
    public let folder: String

    public init(spool: Spool) {
        folder = spool.locks
    }

    public func tryLock(key: String) -> (@Sendable () -> Void)? {
        let path = "\(folder)/\(OutputStore.fileName(forKey: key))"
        while true {
            let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
            guard fd >= 0 else {
                // No lock folder (removed under us): make it and try once more; else run unlocked
                // rather than refuse every job.
                if errno == ENOENT, mkdir(folder, 0o755) == 0 { continue }
                return {}
            }
            guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
                close(fd)
                return nil
            }
            var opened = stat()
            var named = stat()
            guard fstat(fd, &opened) == 0, stat(path, &named) == 0,
                opened.st_ino == named.st_ino, opened.st_dev == named.st_dev
            else {
                close(fd)  // removed by its last holder after we opened it: take the new one
                continue
            }
            let holder = JSONValue.object([
                ("key", .string(key)), ("pid", JSONValue(Int(getpid()))),
                ("startedAtMs", JSONValue(Int(Date().timeIntervalSince1970 * 1000))),
            ])
            let bytes = JSONWriter.data(holder)
            _ = ftruncate(fd, 0)
            _ = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress!, $0.count, 0) }
            return {
                unlink(path)
                close(fd)
            }
        }
    }

    /// The keys held now by live processes, with when each started, read from the lock files.
    public func held() -> [(key: String, pid: Int, startedAt: Date)] {
        FileSystem.names(in: folder).compactMap { name in
            guard !name.hasPrefix("."), let data = FileManager.default.contents(atPath: "\(folder)/\(name)"),
                let value = try? JSONParser.parse([UInt8](data)),
                let key = value["key"]?.stringValue, let pid = value["pid"]?.intValue, let ms = value["startedAtMs"]?.intValue,
                kill(pid_t(pid), 0) == 0 || errno == EPERM
            else { return nil }
            return (key, pid, Date(timeIntervalSince1970: Double(ms) / 1000))
        }
    }
}
