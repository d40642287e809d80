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

    /// What recovery did with the files of dead watchers.
    struct Recovered {
        /// Files put back in inbox/ (their names there).
        var returned: [String] = []
        /// Files taken into the recovering watcher's own folder with the records of the jobs
        /// that ended under the dead one (their names there): they go on from where it stopped.
        var adopted: [String] = []
        /// Why records a dead watcher seemed to leave were not believed.
        var refused: [String] = []
    }

    /// Puts the files of dead watchers back in inbox/ and removes their folders; files lying in
    /// active/ itself (no owner) go back too.
    ///
    /// A file whose jobs partly ended under the dead watcher keeps their records, and the
    /// records never pass through inbox/, where producers write: the file and its records move
    /// from the dead watcher's folder into `own` (the recovering watcher's), which takes the file
    /// as claimed. Records are believed only from a folder a watcher made: owned by the runner's
    /// user and open to no one else (a lease folder is made 0700); anything else is a forgery
    /// (producers may write to active/ under `--group`), whose files go back to inbox/ to run in
    /// full.
    static func recover(spool: Spool, into own: WatcherLease?) -> Recovered {
        var recovered = Recovered()
        for name in FileSystem.names(in: spool.active) {
            let path = "\(spool.active)/\(name)"
            guard let entry = FileSystem.entry(path) else { continue }
            if entry.type != .directory {
                if !name.hasPrefix("."), let back = try? FileSystem.moveKeepingBoth(path, into: spool.inbox, name: name) {
                    recovered.returned.append(back)
                }
                continue
            }
            if name == own?.id { continue }
            if name.hasPrefix(".new-") {
                // A staging folder: its watcher either renames it within microseconds or died.
                guard let age = age(of: entry), age > 60 else { continue }
            }
            let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)
            guard fd >= 0 else { continue }
            defer { close(fd) }
            guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { continue }  // its watcher lives
            var info = stat()
            let trusted = fstat(fd, &info) == 0 && info.st_uid == geteuid() && info.st_mode & 0o077 == 0
            let names = FileSystem.names(in: path)
            for file in names where !file.hasPrefix(".") {
                var records: [UInt8] = []
                for part in [".\(file)\(Spool.resultsSuffix)", ".\(file)\(Spool.replaySuffix)"] {
                    records += OutputStore.readFile(in: fd, part) ?? []
                }
                if !records.isEmpty && !trusted {
                    recovered.refused.append(
                        "\(file): records in \(path) were not believed (the folder is not one a watcher made: owner \(info.st_uid), mode "
                            + "\(String(info.st_mode & 0o7777, radix: 8))); its jobs run again")
                }
                if !records.isEmpty, trusted, let own, FileSystem.entry("\(path)/\(file)")?.type == .regular,
                    let taken = try? own.adopt("\(path)/\(file)", name: file, records: records, mode: spool.fileMode)
                {
                    recovered.adopted.append(taken)
                    continue
                }
                guard let back = try? FileSystem.moveKeepingBoth("\(path)/\(file)", into: spool.inbox, name: file) else { continue }
                recovered.returned.append(back)
            }
            for file in FileSystem.names(in: path) { unlink("\(path)/\(file)") }
            rmdir(path)
        }
        // Back in line for good: the names in inbox/ survive a power loss.
        if !recovered.returned.isEmpty { try? Durability.syncFolder(spool.inbox) }
        if !recovered.adopted.isEmpty, let own { try? Durability.syncFolder(own.folder) }
        return recovered
    }

    /// Takes a dead watcher's file into this folder with the records of its jobs that ended
    /// there (written first, beside the name the file gets); the name it got.
    func adopt(_ source: String, name: String, records: [UInt8], mode: mode_t) throws(FileSystem.Failure) -> String {
        var attempt = 1
        while true {
            let candidate = FileSystem.numbered(name, attempt)
            attempt += 1
            guard FileSystem.entry("\(folder)/\(candidate)") == nil else { continue }
            try FileSystem.writeAtomically(records, to: "\(folder)/.\(candidate)\(Spool.replaySuffix)", mode: mode)
            do {
                try FileSystem.moveNoReplace(source, to: "\(folder)/\(candidate)")
            } catch {
                unlink("\(folder)/.\(candidate)\(Spool.replaySuffix)")
                throw error
            }
            return candidate
        }
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
