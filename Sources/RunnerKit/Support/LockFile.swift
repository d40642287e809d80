import Glibc

/// Opening a file that a lock is taken on (`flock`): the one way the run lock and the spool's key
/// locks open theirs. Never through a symbolic link (the file is truncated and written), never
/// blocking (a FIFO planted at the name does not hang the runner), and only a regular file.
enum LockFile {
    /// Why a lock file could not be opened.
    enum Failure: Error {
        /// `open` failed with this errno (ELOOP: a link; ENXIO: a FIFO nobody writes; EISDIR…).
        case open(Int32)
        /// Something other than a regular file is at the name.
        case notARegularFile
    }

    /// The open descriptor and what it names; the caller locks and closes it.
    static func open(
        _ path: String, mode: mode_t,
        using openFile: (String, Int32, mode_t) -> Int32 = { Glibc.open($0, $1, $2) }
    ) -> Result<(fd: Int32, info: stat), Failure> {
        let fd = openFile(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, mode)
        guard fd >= 0 else { return .failure(.open(errno)) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            return .failure(.notARegularFile)
        }
        return .success((fd, info))
    }
}
