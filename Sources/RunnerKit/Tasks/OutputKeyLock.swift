import Glibc
import Synchronization

/// One task per key across every engine and process writing to one output directory: a lock
/// of one byte of `.locks/keys`, at an offset made of the key's SHA-256, taken with an open
/// file description lock (`F_OFD_SETLK`). The kernel frees it when its holder dies, so a
/// `kill -9` leaves no stale lock.
///
/// The file is made once and stays; a job's lock costs two `fcntl` calls and a `stat`, where a
/// file made and removed per key cost seven calls, two of them a directory's. Each lock (each
/// engine) opens the file itself: locks of one open file description never conflict, those of
/// two always do, also within one process.
///
/// The file is opened without following a link (a link planted at its name, in an output
/// others may write to, is removed, never followed) and without blocking, and must be a regular
/// file. After each lock the name is checked to still name the file locked: a file removed or
/// replaced meanwhile (the folder removed between jobs) is opened anew, so that two processes
/// never lock two different files of one name.
package final class OutputKeyLock: KeyLocking {
    /// The folder of the lock file, made when first needed.
    package let folder: String
    /// The lock file's name in the folder.
    static let fileName = "keys"
    /// The lock file's path, as a job's lock checks it and its messages name it.
    private let path: String

    private struct Failure: Error {
        var code: Int32
    }

    private struct Opened {
        var fd: Int32
        var file: stat
    }
    private let opened = Mutex<Opened?>(nil)

    package init(folder: String) {
        self.folder = folder
        self.path = "\(folder)/\(Self.fileName)"
    }

    deinit {
        opened.withLock { if let fd = $0?.fd { close(fd) } }
        replaced.withLock { for fd in $0 { close(fd) } }
    }

    /// The offset of `key`'s byte: 60 bits of its SHA-256 (two keys share one only by a
    /// collision of the hash).
    static func offset(of key: String) -> off_t {
        off_t(UInt64(SHA256.hex(key.utf8).prefix(15), radix: 16) ?? 0)
    }

    package func lock(key: String) -> KeyLockOutcome {
        let offset = Self.offset(of: key)
        var stale: Int32?
        for _ in 0..<8 {
            let current: Opened
            switch descriptor(replacing: stale) {
            case .success(let fd): current = fd
            case .failure(let failure): return .unavailable("the key lock \(path) could not be taken: \(String(cString: strerror(failure.code)))")
            }
            stale = nil
            guard Self.range(current.fd, F_WRLCK, at: offset) == 0 else {
                let code = errno
                if code == EAGAIN || code == EACCES { return .heldElsewhere }
                return .unavailable("the key lock \(path) could not be taken: \(String(cString: strerror(code)))")
            }
            guard Self.names(path, current.file) else {
                // Removed or replaced since it was opened: lock the file the name names now.
                _ = Self.range(current.fd, F_UNLCK, at: offset)
                stale = current.fd
                continue
            }
            let fd = current.fd
            return .acquired(release: { [self] in
                _ = Self.range(fd, F_UNLCK, at: offset)
                withExtendedLifetime(self) {}  // the descriptor stays open until here
            })
        }
        return .unavailable("the key lock \(path) could not be taken: it keeps changing under the runner")
    }

    /// Locks (`F_WRLCK`) or unlocks (`F_UNLCK`) the byte at `offset`, never waiting.
    private static func range(_ fd: Int32, _ type: Int32, at offset: off_t) -> Int32 {
        var lock = flock()
        lock.l_type = Int16(type)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = offset
        lock.l_len = 1
        return fcntl(fd, Self.setOpenFileDescriptionLock, &lock)
    }

    /// `F_OFD_SETLK` (Linux 3.15 and later), which Glibc declares only for `_GNU_SOURCE`.
    private static let setOpenFileDescriptionLock: Int32 = 37

    /// Whether `path` names `file` (not a link, nor another file since).
    private static func names(_ path: String, _ file: stat) -> Bool {
        var named = stat()
        return fstatat(AT_FDCWD, path, &named, AT_SYMLINK_NOFOLLOW) == 0 && named.st_ino == file.st_ino && named.st_dev == file.st_dev
    }

    /// The lock file's descriptor, opened (the folder and the file made, links planted at
    /// either name removed) when there is none yet or `stale` is the one held. A stale
    /// descriptor is kept open until the end: a lock of it may still be held, and is let go of
    /// through it.
    private func descriptor(replacing stale: Int32?) -> Result<Opened, Failure> {
        opened.withLock { opened in
            if let current = opened, current.fd != stale { return .success(current) }
            if let stale { replaced.withLock { $0.append(stale) } }
            opened = nil
            var code: Int32 = ELOOP
            for _ in 0..<4 {
                // The folder without following a link, the file relative to it.
                let folderFD = open(folder, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                guard folderFD >= 0 else {
                    code = errno
                    // No lock folder yet (or removed): make it and try again.
                    if code == ENOENT, mkdir(folder, 0o700) == 0 || errno == EEXIST { continue }
                    // A link (or a file) planted at the folder's name: remove it and try again.
                    if code == ELOOP || code == ENOTDIR, FolderKeyLock.removePlanted(in: AT_FDCWD, folder) { continue }
                    return .failure(Failure(code: code))
                }
                defer { close(folderFD) }
                switch LockFile.open(Self.fileName, mode: 0o600, using: { openat(folderFD, $0, $1, $2) }) {
                case .success(let file):
                    opened = Opened(fd: file.fd, file: file.info)
                    return .success(Opened(fd: file.fd, file: file.info))
                case .failure(.open(let failed)):
                    code = failed
                    if code == ENOENT { continue }  // the folder removed since it was opened
                    if code == ELOOP || code == ENXIO || code == EISDIR, FolderKeyLock.removePlanted(in: folderFD, Self.fileName) { continue }
                    return .failure(Failure(code: code))
                case .failure(.notARegularFile):
                    code = EINVAL
                    if FolderKeyLock.removePlanted(in: folderFD, Self.fileName) { continue }
                    return .failure(Failure(code: code))
                }
            }
            return .failure(Failure(code: code))
        }
    }

    /// Descriptors of files found removed or replaced, closed at the end.
    private let replaced = Mutex<[Int32]>([])
}
