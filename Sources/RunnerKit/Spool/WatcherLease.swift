import Foundation
import Glibc

/// A watcher's own folder under active/, `flock`'ed for as long as the watcher lives.
///
/// A claimed file is renamed into it, so the folder says whose the file is, and the lock says
/// whether that one still lives: the kernel drops the lock when its holder dies, even by
/// `kill -9`. Recovery takes the lock of each folder it finds; if it gets it, the owner is dead,
/// and the folder's files go back to inbox/.
///
/// The folder is made under a dot-name, locked, and only then renamed to its real name, so
/// recovery never takes a folder whose watcher has not yet locked it.
final class WatcherLease: Sendable {
    let id: String
    let folder: String
    private let fd: Int32

    init(spool: Spool) throws(Spool.Error) {
        try spool.makeFolders()
        let id = "\(getpid())-\(String(UInt32.random(in: 0...UInt32.max), radix: 36))"
        let staging = "\(spool.active)/.new-\(id)"
        let folder = "\(spool.active)/\(id)"
        guard mkdir(staging, 0o700) == 0 else {
            throw Spool.Error("cannot make \(staging): \(String(cString: strerror(errno)))")
        }
        let fd = open(staging, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0, flock(fd, LOCK_EX | LOCK_NB) == 0, rename(staging, folder) == 0 else {
            let reason = String(cString: strerror(errno))
            if fd >= 0 { close(fd) }
            rmdir(staging)
            throw Spool.Error("cannot take a folder in \(spool.active): \(reason)")
        }
        self.id = id
        self.folder = folder
        self.fd = fd
    }

    /// Removes the folder (it must be empty by now) and lets go of the lock.
    func end() {
        for name in FileSystem.names(in: folder) where name.hasPrefix(".") { unlink("\(folder)/\(name)") }
        rmdir(folder)
        close(fd)
    }

    /// Puts the files of dead watchers back in inbox/ and removes their folders; files lying in
    /// active/ itself (no owner) go back too. Returns the names put back.
    static func recover(spool: Spool, except own: String? = nil) -> [String] {
        var returned: [String] = []
        for name in FileSystem.names(in: spool.active) {
            let path = "\(spool.active)/\(name)"
            guard let entry = FileSystem.entry(path) else { continue }
            if entry.type != .directory {
                if !name.hasPrefix("."), let back = try? FileSystem.moveKeepingBoth(path, into: spool.inbox, name: name) {
                    returned.append(back)
                }
                continue
            }
            if name == own { continue }
            if name.hasPrefix(".new-") {
                // A staging folder: its watcher either renames it within microseconds or died.
                guard let age = age(of: entry), age > 60 else { continue }
            }
            let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard fd >= 0 else { continue }
            defer { close(fd) }
            guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { continue }  // its watcher lives
            let names = FileSystem.names(in: path)
            for file in names where !file.hasPrefix(".") {
                guard let back = try? FileSystem.moveKeepingBoth("\(path)/\(file)", into: spool.inbox, name: file) else { continue }
                returned.append(back)
                // The records of its jobs that ended go with it: they do not run again.
                var replay: [UInt8] = []
                for part in [".\(file)\(Spool.resultsSuffix)", ".\(file)\(Spool.replaySuffix)"] {
                    replay += OutputStore.readFile(in: AT_FDCWD, "\(path)/\(part)") ?? []
                }
                if !replay.isEmpty { try? FileSystem.writeAtomically(replay, to: "\(spool.inbox)/.\(back)\(Spool.replaySuffix)", mode: spool.fileMode) }
            }
            for file in FileSystem.names(in: path) { unlink("\(path)/\(file)") }
            rmdir(path)
        }
        // Back in line for good: the names in inbox/ survive a power loss.
        if !returned.isEmpty { try? Durability.syncFolder(spool.inbox) }
        return returned
    }

    /// Whether the watcher that owns the folder `name` under active/ is alive (it holds its lock).
    static func isAlive(spool: Spool, folder name: String) -> Bool {
        let fd = open("\(spool.active)/\(name)", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        guard flock(fd, LOCK_SH | LOCK_NB) == 0 else { return true }
        return false
    }

    private static func age(of entry: FileSystem.Entry) -> Double? {
        FileSystem.seconds(FileSystem.now()) - FileSystem.seconds(entry.changed)
    }
}
