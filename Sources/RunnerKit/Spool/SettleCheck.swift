import Glibc

/// Whether a file in inbox/ that did not arrive by rename is complete: written in place under
/// its final name (scp, an FTP or SMB upload, `cp`, `cat > file`), it may be half there.
///
/// Complete means both:
/// - no process holds it open for writing: on Linux a read lease (`fcntl(F_SETLEASE, F_RDLCK)`)
///   is refused with EAGAIN while a writer has it open. The lease is let go at once. Where a
///   lease cannot be asked for (another owner's file without CAP_LEASE, a file system without
///   leases), this part is skipped and the settle time decides alone;
/// - its contents and size have not changed for `settle`: its mtime and ctime (which a write,
///   a truncate and a change of mtime all move) are at least `settle` old, or the watcher saw
///   the same size, mtime and ctime (`Signature`) `settle` apart on its own clock.
///
/// Apache Camel's `readLock=changed` and NiFi's "Minimum File Age" use the same idea.
/// Anything that is not a regular file is "complete": the watcher claims it and sends it to
/// failed/ with the reason.
struct SettleCheck: Sendable {
    enum Verdict: Equatable, Sendable {
        /// Take it now.
        case complete
        /// A process holds it open for writing.
        case beingWritten
        /// Changed less than `settle` ago; as it is now.
        case settling(Signature)
        /// Nothing is at the name (taken by another watcher, or removed).
        case gone
    }

    /// What a write, a truncate or a change of mtime moves.
    struct Signature: Equatable, Sendable {
        var size: Int
        var modified: Double
        var changed: Double
    }

    let settle: Duration

    /// Linux's F_SETLEASE (F_LINUX_SPECIFIC_BASE + 0); the Glibc module does not import it.
    private static let setLease: Int32 = 1024

    /// A lease break is announced with SIGIO, whose default action ends the process; the
    /// lease is held for a moment only, but a writer opening the file in that moment would
    /// raise it.
    private static let ignoreSIGIO: Void = { signal(SIGIO, SIG_IGN) }()

    func verdict(path: String, now: timespec = FileSystem.now()) -> Verdict {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
        guard fd >= 0 else { return errno == ENOENT ? .gone : .complete }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return .complete }
        Self.ignoreSIGIO
        if fcntl(fd, Self.setLease, Int32(F_RDLCK)) == 0 {
            _ = fcntl(fd, Self.setLease, Int32(F_UNLCK))
        } else if errno == EAGAIN {
            return .beingWritten
        }
        let last = max(FileSystem.seconds(info.st_mtim), FileSystem.seconds(info.st_ctim))
        guard FileSystem.seconds(now) - last < settle.inSeconds else { return .complete }
        return .settling(Signature(size: Int(info.st_size), modified: FileSystem.seconds(info.st_mtim), changed: FileSystem.seconds(info.st_ctim)))
    }
}
