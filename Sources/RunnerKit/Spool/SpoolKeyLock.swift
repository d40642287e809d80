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
package struct SpoolKeyLock: KeyLocking {
    package let folder: String

    /// Opens a lock file; a test hands in one that fails, as `open` does when the process is
    /// out of descriptors.
    let openFile: @Sendable (String, Int32, mode_t) -> Int32

    package init(spool: Spool) {
        self.init(folder: spool.locks, mode: spool.fileMode)
    }

    init(folder: String, mode: mode_t = 0o600, openFile: @escaping @Sendable (String, Int32, mode_t) -> Int32 = { open($0, $1, $2) }) {
        self.folder = folder
        self.mode = mode
        self.openFile = openFile
    }

    let mode: mode_t

    /// The lock file is opened without following a link (a link planted at its name is
    /// removed, never written through) and without blocking (a FIFO there does not hang the
    /// runner), and must be a regular file.
    package func lock(key: String) -> KeyLockOutcome {
        let path = "\(folder)/\(OutputStore.fileName(forKey: key))"
        var tries = 0
        while true {
            tries += 1
            guard tries <= 8 else { return .unavailable("the key lock \(path) could not be taken: it keeps changing under the runner") }
            let fd: Int32
            let opened: stat
            switch LockFile.open(path, mode: mode, using: openFile) {
            case .success(let file):
                (fd, opened) = file
            case .failure(.open(let code)):
                // No lock folder (removed under us): make it and try again.
                if code == ENOENT, mkdir(folder, 0o700) == 0 || errno == EEXIST { continue }
                // A symbolic link, or something else planted at the name: remove it and try again.
                if code == ELOOP || code == ENXIO || code == EISDIR, Self.removePlanted(path) { continue }
                return .unavailable("the key lock \(path) could not be taken: \(String(cString: strerror(code)))")
            case .failure(.notARegularFile):
                if Self.removePlanted(path) { continue }
                return .unavailable("the key lock \(path) could not be taken: it is not a regular file")
            }
            guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
                let code = errno
                close(fd)
                if code == EWOULDBLOCK { return .heldElsewhere }
                return .unavailable("the key lock \(path) could not be taken: \(String(cString: strerror(code)))")
            }
            var named = stat()
            guard lstat(path, &named) == 0, opened.st_ino == named.st_ino, opened.st_dev == named.st_dev else {
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
            return .acquired(release: {
                unlink(path)
                close(fd)
            })
        }
    }

    /// Removes what is at `path` unless it is a regular file (which may be a live lock);
    /// a folder is removed only when empty. Returns whether something was removed.
    private static func removePlanted(_ path: String) -> Bool {
        guard let entry = FileSystem.entry(path), entry.type != .regular else { return false }
        return entry.type == .directory ? rmdir(path) == 0 : unlink(path) == 0
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
