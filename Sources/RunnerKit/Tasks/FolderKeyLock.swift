import Foundation
import Glibc
import Synchronization

/// One `flock` per key in a folder: the spool's `locks/` (`SpoolKeyLock`), so that a key never
/// runs in two watchers of one spool (an output's keys are locked by `OutputKeyLock`). The kernel frees a lock
/// when its holder dies, so a `kill -9` leaves no stale lock, only a file the next holder reuses.
///
/// A lock file lives only while it is held: the holder may write who holds it (the spool's, for
/// `runner status`), and removes it before it lets go. One who opened the file just before it was
/// removed would lock a file nobody else can find, so a taker checks after locking that the name
/// still names the file it locked, and tries again if not.
///
/// Everything is done through the folder, opened once without following a link and held open
/// (opened again if it was removed): a link planted at the folder's name (in an output others
/// may write to) is removed, never followed, and a lock costs a few calls relative to the folder.
package struct FolderKeyLock: KeyLocking {
    /// The folder of the lock files, made when first needed.
    package let folder: String
    let mode: mode_t
    /// Whether a holder writes who it is (key, process, start) into its file.
    let namesHolder: Bool

    /// Opens a lock file in the folder (its descriptor, the file's name); a test hands in one
    /// that fails, as `openat` does when the process is out of descriptors.
    let openFile: @Sendable (Int32, String, Int32, mode_t) -> Int32
    private let opened = OpenedFolder()

    init(
        folder: String, mode: mode_t = 0o600, namesHolder: Bool = true,
        openFile: @escaping @Sendable (Int32, String, Int32, mode_t) -> Int32 = { openat($0, $1, $2, $3) }
    ) {
        self.folder = folder
        self.mode = mode
        self.namesHolder = namesHolder
        self.openFile = openFile
    }

    /// The lock file is opened without following a link (a link planted at its name is
    /// removed, never written through) and without blocking (a FIFO there does not hang the
    /// runner), and must be a regular file.
    package func lock(key: String) -> KeyLockOutcome {
        let name = OutputStore.fileName(forKey: key)
        let path = "\(folder)/\(name)"
        func unavailable(_ code: Int32) -> KeyLockOutcome {
            .unavailable("the key lock \(path) could not be taken: \(String(cString: strerror(code)))")
        }
        var removed: Int32?
        for _ in 0..<8 {
            let folderFD: Int32
            switch opened.descriptor(of: folder, replacing: removed) {
            case .success(let fd): folderFD = fd
            case .failure(let failure): return unavailable(failure.code)
            }
            removed = nil
            let fd: Int32
            let file: stat
            switch LockFile.open(name, mode: mode, using: { openFile(folderFD, $0, $1, $2) }) {
            case .success(let lockFile):
                (fd, file) = lockFile
            case .failure(.open(let code)):
                // The folder was removed since it was opened: open it (or make it) again.
                if code == ENOENT {
                    removed = folderFD
                    continue
                }
                // A symbolic link, or something else planted at the name: remove it and try again.
                if code == ELOOP || code == ENXIO || code == EISDIR, Self.removePlanted(in: folderFD, name) { continue }
                return unavailable(code)
            case .failure(.notARegularFile):
                if Self.removePlanted(in: folderFD, name) { continue }
                return .unavailable("the key lock \(path) could not be taken: it is not a regular file")
            }
            guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
                let code = errno
                close(fd)
                if code == EWOULDBLOCK { return .heldElsewhere }
                return unavailable(code)
            }
            guard Self.names(folderFD, name, file) else {
                close(fd)  // removed by its last holder after we opened it: take the new one
                continue
            }
            if namesHolder {
                let holder = JSONValue.object([
                    ("key", .string(key)), ("pid", JSONValue(Int(getpid()))),
                    ("startedAtMs", JSONValue(Int(Date().timeIntervalSince1970 * 1000))),
                ])
                let bytes = JSONWriter.data(holder)
                _ = ftruncate(fd, 0)
                _ = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress!, $0.count, 0) }
            }
            let opened = self.opened
            return .acquired(release: {
                // Only while the name still names the file locked: never another holder's.
                if Self.names(folderFD, name, file) { unlinkat(folderFD, name, 0) }
                close(fd)
                withExtendedLifetime(opened) {}  // the folder's descriptor stays open until here
            })
        }
        return .unavailable("the key lock \(path) could not be taken: it keeps changing under the runner")
    }

    /// Whether `name` in the folder `folderFD` is `file` (not a link, nor another file since).
    private static func names(_ folderFD: Int32, _ name: String, _ file: stat) -> Bool {
        var named = stat()
        return fstatat(folderFD, name, &named, AT_SYMLINK_NOFOLLOW) == 0 && named.st_ino == file.st_ino && named.st_dev == file.st_dev
    }

    /// Removes what is at `name` in the folder `folderFD` unless it is a regular file (which may
    /// be a live lock); a folder is removed only when empty. Returns whether something was removed.
    static func removePlanted(in folderFD: Int32, _ name: String) -> Bool {
        var info = stat()
        guard fstatat(folderFD, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { return false }
        switch info.st_mode & S_IFMT {
        case S_IFREG: return false
        case S_IFDIR: return unlinkat(folderFD, name, AT_REMOVEDIR) == 0
        default: return unlinkat(folderFD, name, 0) == 0
        }
    }
}

/// A lock folder's descriptor, opened on first need and held open while locks of the folder may
/// use it. One found removed is replaced and closed only at the end, since a lock being taken
/// or let go of may still use it.
private final class OpenedFolder: Sendable {
    struct Failure: Error {
        var code: Int32
    }

    private let state = Mutex<(current: Int32, replaced: [Int32])>((-1, []))

    /// The folder's descriptor, opened (the folder made, a link at its name removed) when there
    /// is none yet or `removed` is the one held.
    func descriptor(of folder: String, replacing removed: Int32?) -> Result<Int32, Failure> {
        state.withLock { state in
            if let removed, state.current == removed {
                state.replaced.append(removed)
                state.current = -1
            }
            if state.current >= 0 { return .success(state.current) }
            var code: Int32 = ELOOP
            for _ in 0..<4 {
                let fd = open(folder, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                if fd >= 0 {
                    state.current = fd
                    return .success(fd)
                }
                code = errno
                // No lock folder yet (or removed): make it and try again.
                if code == ENOENT, mkdir(folder, 0o700) == 0 || errno == EEXIST { continue }
                // A link (or a file) planted at the folder's name: remove it and try again.
                if code == ELOOP || code == ENOTDIR, FolderKeyLock.removePlanted(in: AT_FDCWD, folder) { continue }
                break
            }
            return .failure(Failure(code: code))
        }
    }

    deinit {
        state.withLock { state in
            for fd in state.replaced + [state.current] where fd >= 0 { close(fd) }
        }
    }
}

extension OutputStore {
    /// The name of the hidden folder of key locks in the output directory.
    static let keyLocksFolder = ".locks"

    /// One lock per key across every engine and process writing to this output directory: a
    /// byte of `.locks/keys` locked while its job runs (`OutputKeyLock`; the kernel frees it if
    /// the holder dies). An engine takes it once its TaskManager admitted a key
    /// (`JobEngine.Configuration.locksKeysInOutput`); a key held elsewhere ends `duplicate`.
    package var keyLock: any KeyLocking {
        OutputKeyLock(folder: "\(root)/\(Self.keyLocksFolder)")
    }
}
