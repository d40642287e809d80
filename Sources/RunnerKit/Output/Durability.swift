import Foundation
import Glibc

/// Making what was written survive a power loss, as mail queues do before they say "accepted"
/// (Maildir, Postfix): a file's data is fsync'ed before the rename that gives it its name, and
/// the folder is fsync'ed after it, so the name itself is on disk. A batch of many files is made
/// durable with one `syncfs` of their file system instead of an fsync each.
///
/// Every call answers the system's reason when it fails; a failed sync means what was written
/// may not survive a crash, so callers do not report it as done.
package enum Durability {
    /// A sync that failed: the path and the system's reason.
    package struct Failure: Error, CustomStringConvertible {
        package var path: String
        package var code: Int32
        package var description: String { "could not make \(path) durable: \(String(cString: strerror(code)))" }
    }

    /// fsync of an open file (its data and size), retried on EINTR.
    package static func sync(fd: Int32, path: String) throws(Failure) {
        while fsync(fd) != 0 {
            if errno == EINTR { continue }
            throw Failure(path: path, code: errno)
        }
    }

    /// fsync of a folder: the names made, renamed or removed in it are on disk.
    package static func syncFolder(_ path: String) throws(Failure) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw Failure(path: path, code: errno) }
        defer { close(fd) }
        try sync(fd: fd, path: path)
    }

    /// fsync of a folder open as `fd`.
    static func syncFolder(fd: Int32, path: String) throws(Failure) {
        try sync(fd: fd, path: path)
    }

    /// `syncfs` of the file system that holds `path`: every file written there, payloads,
    /// records and run logs, in one call (Linux; elsewhere, `sync`).
    package static func syncFileSystem(of path: String) throws(Failure) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Failure(path: path, code: errno) }
        defer { close(fd) }
        guard let syncfs = Self.syncfs else {
            Glibc.sync()
            return
        }
        while syncfs(fd) != 0 {
            if errno == EINTR { continue }
            throw Failure(path: path, code: errno)
        }
    }

    private typealias SyncFS = @convention(c) (Int32) -> Int32

    /// Glibc has syncfs since 2.14, but its module does not import it.
    private static let syncfs: SyncFS? = {
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "syncfs") else { return nil }
        return unsafeBitCast(symbol, to: SyncFS.self)
    }()

    // MARK: - Leftovers

    /// Prefixes of the temporary files the runner makes: payloads and records (`TemporaryFile`)
    /// and files on their way into a spool's inbox (`Spool.submit`).
    static let temporaryPrefixes = [".tmp-", ".submit-"]

    /// Removes the temporary files that crashed processes left in `folder` (and, with `depth`,
    /// in the folders below it, never through a link): those whose process, named in the file
    /// name, is gone and that were last written `minimumAge` seconds ago or more (a process of
    /// another pid namespace sharing the folder may look gone), and any a day old. Returns how
    /// many were removed.
    @discardableResult
    package static func sweepLeftovers(in folder: String, depth: Int = 0, minimumAge: Int = 60) -> Int {
        var removed = 0
        var below: [String] = []
        let now = Int(time(nil))
        FolderReader.forEachEntry(in: folder) { entry in
            let name = String(decoding: entry.bytes, as: UTF8.self)
            if entry.isDirectory {
                if depth > 0 { below.append(name) }
                return
            }
            guard let prefix = temporaryPrefixes.first(where: { name.hasPrefix($0) }) else { return }
            var info = stat()
            guard lstat("\(folder)/\(name)", &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return }
            let age = now - info.st_mtim.wholeSeconds
            if age > 86_400 || age >= minimumAge && !isAlive(pidIn: name.dropFirst(prefix.count)) {
                if unlink("\(folder)/\(name)") == 0 { removed += 1 }
            }
        }
        for name in below { removed += sweepLeftovers(in: "\(folder)/\(name)", depth: depth - 1, minimumAge: minimumAge) }
        return removed
    }

    /// The owner's pid is the decimal number that starts a temporary name's tail (`<pid>.…`);
    /// a name without one is kept (only age removes it).
    private static func isAlive(pidIn tail: Substring) -> Bool {
        guard let dot = tail.firstIndex(of: "."), let pid = Int32(tail[..<dot]), pid > 0 else { return true }
        if pid == getpid() { return true }
        return kill(pid, 0) == 0 || errno == EPERM
    }
}
