import Glibc
import Synchronization

/// A hidden file (`.tmp-…`, open for reading too: a large payload is hashed by reading it back)
/// that becomes a payload by rename, or disappears: when discarded,
/// and at the latest when the value is released, so no temporary file outlives its job.
///
/// Made and renamed relative to its folder's open descriptor (`openat`, `renameat`), so a
/// write resolves one name, not a whole path, and never follows a link.
package final class TemporaryFile: Sendable {
    let folder: OutputStore.Folder
    let name: String
    /// The file's inode (set for a partial download's file, whose sidecar names it).
    let inode: Int
    private let state: Mutex<(fd: Int32, done: Bool)>

    /// Names are unique within the process (a counter) and across processes (the pid and a
    /// random part); the pid lets the next start remove what a crashed process left
    /// (`Durability.sweepLeftovers`).
    private static let prefix = ".tmp-\(getpid())." + String(UInt32.random(in: 0...UInt32.max) | 0x1000_0000, radix: 16) + "-"
    private static let counter = Atomic<Int>(0)

    /// `mode`: exactly these permissions (the spool's, whatever the umask); nil for 0666 less the umask.
    init(folder: OutputStore.Folder, mode: mode_t? = nil) throws(OutputStore.WriteError) {
        while true {
            let name = Self.prefix + String(Self.counter.add(1, ordering: .relaxed).newValue, radix: 36)
            let fd = name.withCString { openat(folder.fd, $0, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode ?? 0o666) }
            if fd >= 0 {
                if let mode { _ = fchmod(fd, mode) }
                self.folder = folder
                self.name = name
                self.inode = 0
                self.state = Mutex((fd, false))
                return
            }
            let code = errno
            guard code == EEXIST || code == EINTR else { throw OutputStore.WriteError(path: folder.path, errno: code) }
        }
    }

    deinit { discard() }

    private init(folder: OutputStore.Folder, name: String, fd: Int32, inode: Int) {
        self.folder = folder
        self.name = name
        self.inode = inode
        self.state = Mutex((fd, false))
    }

    /// A kept partial download's file (`PartialDownload`), through the descriptor it was checked
    /// and locked on (never opened again by its name): cut to its first `keeping` bytes and
    /// written on from there. It becomes a payload by rename as any other; `keep()` leaves it on
    /// disk instead of removing it.
    convenience init(folder: OutputStore.Folder, partialName name: String, handle: PartialDownload.Handle, keeping offset: Int) throws(OutputStore.WriteError) {
        guard let fd = handle.take() else {
            throw OutputStore.WriteError(path: folder.path + "/" + name, reason: "the partial download is no longer held")
        }
        var info = stat()
        guard fstat(fd, &info) == 0, Int(info.st_size) >= offset, ftruncate(fd, off_t(offset)) == 0,
            lseek(fd, 0, SEEK_END) == off_t(offset)
        else {
            close(fd)
            throw OutputStore.WriteError(path: folder.path + "/" + name, reason: "the partial download changed under the runner")
        }
        self.init(folder: folder, name: name, fd: fd, inode: Int(info.st_ino))
    }

    /// A new partial download's file for a key: made as a temporary file, locked, then renamed
    /// over whatever was at `name` (a link is replaced, never written through). Nil when the
    /// file at `name` is locked (another attempt is writing it, and this one leaves it alone),
    /// or cannot be replaced: the body then goes to an ordinary temporary file.
    static func freshPartial(folder: OutputStore.Folder, name: String) throws(OutputStore.WriteError) -> TemporaryFile? {
        // The one there is replaced only while its lock is held here: whoever holds the lock of
        // the file at the name is the one attempt writing it.
        let old = openat(folder.fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY)
        defer { if old >= 0 { close(old) } }
        if old >= 0, flock(old, LOCK_EX | LOCK_NB) != 0 { return nil }
        let file = try TemporaryFile(folder: folder)
        let fd = file.state.withLock { state in
            state.done = true  // handed on to the partial's value below
            return state.fd
        }
        var info = stat()
        guard flock(fd, LOCK_EX | LOCK_NB) == 0, fstat(fd, &info) == 0,
            file.name.withCString({ from in name.withCString { renameat(folder.fd, from, folder.fd, $0) } }) == 0
        else {
            // Something that cannot be replaced is there (a folder, say): no partial this time.
            close(fd)
            unlinkat(folder.fd, file.name, 0)
            return nil
        }
        return TemporaryFile(folder: folder, name: name, fd: fd, inode: Int(info.st_ino))
    }

    /// The file's absolute path (for messages and reading back).
    package var path: String { folder.path + "/" + name }

    /// Appends bytes; a short write (a full disk) throws with the system's reason.
    package func append(_ bytes: UnsafeRawBufferPointer) throws {
        try state.withLock { state throws(OutputStore.WriteError) in
            guard !state.done else { throw OutputStore.WriteError(path: path, reason: "the temporary file was already removed") }
            var offset = 0
            while offset < bytes.count {
                let n = Glibc.write(state.fd, bytes.baseAddress! + offset, bytes.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    throw OutputStore.WriteError(path: folder.path, errno: errno)
                }
                offset += n
            }
        }
    }

    package func append(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try append($0) }
    }

    /// Reads the whole file back (for payloads that must be parsed, bounded by maxBytes).
    package func readAll() throws -> [UInt8] {
        guard let bytes = OutputStore.readFile(in: folder.fd, name) else {
            throw OutputStore.WriteError(path: path, reason: "could not read the temporary file back")
        }
        return bytes
    }

    /// Renames to `name` in `target`. Atomic against a crash of the process (readers see the old
    /// file or the new one, never half). With `durable`, also against a power loss: the data is
    /// fsync'ed before the rename and the folder after it; without, the caller makes the batch
    /// durable at once (`Durability.syncFileSystem`), or not at all.
    func commit(to target: OutputStore.Folder, name targetName: String, durable: Bool = false) throws(OutputStore.WriteError) {
        try state.withLock { state throws(OutputStore.WriteError) in
            // Made only for an error's message: a commit that succeeds builds no path.
            var targetPath: String { target.path + "/" + targetName }
            guard !state.done else { throw OutputStore.WriteError(path: targetPath, reason: "the temporary file is gone") }
            state.done = true
            if durable, fsync(state.fd) != 0 {
                let code = errno
                close(state.fd)
                unlinkat(folder.fd, name, 0)
                throw OutputStore.WriteError(path: targetPath, errno: code)
            }
            // A partial stays open, its lock held, until it is renamed: no other attempt takes
            // it over (and cuts it to what its sidecar names) between the close and the rename.
            let partial = inode != 0
            if !partial, close(state.fd) != 0 {
                let code = errno
                unlinkat(folder.fd, name, 0)
                throw OutputStore.WriteError(path: targetPath, errno: code)
            }
            let renamed = name.withCString { from in targetName.withCString { to in renameat(folder.fd, from, target.fd, to) } }
            if renamed != 0 {
                let code = errno
                unlinkat(folder.fd, name, 0)
                if partial { close(state.fd) }
                throw OutputStore.WriteError(path: targetPath, errno: code)
            }
            if partial {
                // Renamed by its name: the file renamed must be the one written.
                var info = stat()
                let same = fstatat(target.fd, targetName, &info, AT_SYMLINK_NOFOLLOW) == 0 && Int(info.st_ino) == inode
                if !same { unlinkat(target.fd, targetName, 0) }
                let closed = close(state.fd) == 0
                guard same else { throw OutputStore.WriteError(path: targetPath, reason: "the partial download was replaced under the runner") }
                guard closed else { throw OutputStore.WriteError(path: targetPath, errno: errno) }
            }
            if durable, fsync(target.fd) != 0 {
                throw OutputStore.WriteError(path: target.path, errno: errno)
            }
        }
    }

    /// fsyncs the data, closes the file, and hands its path to `place`, which renames it (for a
    /// rename that must not replace, as into a spool's inbox); the file is removed if `place`
    /// throws. The caller fsyncs the folder it was renamed into.
    func commit<Placed>(durablyBy place: (String) throws -> Placed) throws -> Placed {
        try state.withLock { state in
            guard !state.done else { throw OutputStore.WriteError(path: path, reason: "the temporary file is gone") }
            state.done = true
            let synced = fsync(state.fd) == 0
            var code = errno
            if close(state.fd) != 0, synced { code = errno } else if synced { code = 0 }
            if code != 0 {
                unlinkat(folder.fd, name, 0)
                throw OutputStore.WriteError(path: path, errno: code)
            }
            do {
                return try place(path)
            } catch {
                unlinkat(folder.fd, name, 0)
                throw error
            }
        }
    }

    /// A second descriptor of the file, for syncing it on another thread while writes go on
    /// (the caller closes it); nil once the file was committed, kept or removed.
    func duplicateDescriptor() -> Int32? {
        state.withLock { state in
            guard !state.done else { return nil }
            let fd = fcntl(state.fd, F_DUPFD_CLOEXEC, 0)
            return fd >= 0 ? fd : nil
        }
    }

    /// Syncs the data and closes the file, leaving it on disk (a partial download to resume);
    /// `synced` runs between the two, when the data reached the disk: a partial's sidecar is
    /// written while its lock is still held, so no other attempt takes the partial over before
    /// the sidecar that describes it is there.
    func keep(synced: () -> Void) {
        state.withLock { state in
            guard !state.done else { return }
            state.done = true
            if fdatasync(state.fd) == 0 { synced() }
            close(state.fd)
        }
    }

    /// Removes the file unless it was committed. Safe to call more than once.
    package func discard() {
        state.withLock { state in
            guard !state.done else { return }
            // Removed before it is closed: a partial's lock is held until its name is gone.
            unlinkat(folder.fd, name, 0)
            close(state.fd)
            state.done = true
        }
    }
}
