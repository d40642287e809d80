import Foundation
import Glibc

/// A spool folder: where producers drop job files and watchers take them.
///
/// ```
/// spool/
///   inbox/             job files waiting (dot-names are ignored: a producer's file being written)
///   active/<watcher>/  files one watcher claimed; the folder is flock'ed while its watcher lives
///   done/              files whose jobs all succeeded, each with <name>.results.jsonl beside it
///   failed/            the rest, with <name>.error.txt (and <name>.results.jsonl if jobs ran)
///   cancel/            cancel requests, one file per key (named by OutputStore.fileName(forKey:))
///   locks/             one file per running key, flock'ed by the process that runs it
/// ```
/// Folders are made on demand, 0700 (only the watcher's user), or 2770 with a producers' group
/// (`group`). Every move is a rename inside the spool, so a file is always in exactly one
/// folder, and a reader never sees half of one; every move that changes what a file means is
/// made durable (the folder fsync'ed) before it is reported.
package struct Spool: Sendable {
    /// A spool problem in words: a folder that cannot be made, a file that cannot be placed.
    package struct Error: Swift.Error, CustomStringConvertible {
        package var description: String
        init(_ description: String) { self.description = description }
    }

    /// The spool folder, absolute.
    package let root: String

    package var inbox: String { root + "/inbox" }
    package var active: String { root + "/active" }
    package var done: String { root + "/done" }
    package var failed: String { root + "/failed" }
    package var cancel: String { root + "/cancel" }
    package var locks: String { root + "/locks" }

    /// Beside a file in done/ or failed/: its result records, one per top-level job.
    package static let resultsSuffix = ".results.jsonl"
    /// Beside a file put back in inbox/ by a watcher that died (hidden, `.<name>.replay.jsonl`):
    /// the records of its jobs that had ended, which do not run again.
    package static let replaySuffix = ".replay.jsonl"
    /// Beside a file in failed/: why.
    package static let errorSuffix = ".error.txt"

    /// The producers' group: folders are 2770 and files 0660 with it; without it, 0700 and 0600.
    package let group: gid_t?

    /// The spool folder when none is named.
    package static let defaultRoot = "spool"

    package init(root: String, group: gid_t? = nil) {
        let absolute = root.hasPrefix("/") ? root : FileManager.default.currentDirectoryPath + "/" + root
        self.root = (absolute as NSString).standardizingPath
        self.group = group
    }

    /// The mode of the spool's folders.
    package var folderMode: mode_t { group == nil ? 0o700 : 0o2770 }
    /// The mode of the files the runner makes in the spool.
    package var fileMode: mode_t { group == nil ? 0o600 : 0o660 }

    /// Makes the spool and its folders where they are missing, with `folderMode` (and the group).
    /// Folders that exist keep their mode, unless a group is given: then they get it and 2770.
    package func makeFolders() throws(Error) {
        do {
            try FileSystem.makeFolder(root, mode: folderMode, group: group, parents: true)
            for folder in [inbox, active, done, failed, cancel, locks] {
                try FileSystem.makeFolder(folder, mode: folderMode, group: group)
            }
        } catch {
            throw Error("cannot use the spool '\(root)': \(error)")
        }
    }

    /// The gid of a group by name or number, for `--group`.
    package static func groupID(named name: String) throws(Error) -> gid_t {
        if let number = gid_t(name) { return number }
        guard let entry = getgrnam(name) else { throw Error("there is no group named '\(name)'") }
        return entry.pointee.gr_gid
    }

    // MARK: - Producing

    /// Copies `file` into inbox/ atomically and durably, and returns the name it got there: a
    /// dot-named copy is written and fsync'ed, renamed to its name (never replacing a waiting
    /// file), and inbox/ is fsync'ed, so once this returns the file survives a power loss.
    package func submit(file: String) throws(Error) -> String {
        try makeFolders()
        let name = (file as NSString).lastPathComponent
        let base = name.hasPrefix(".") ? "_" + name.dropFirst() : name
        let source = open(file, O_RDONLY | O_CLOEXEC)
        guard source >= 0 else { throw Error("\(file): cannot be read: \(String(cString: strerror(errno)))") }
        defer { close(source) }
        let folderFD = open(inbox, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard folderFD >= 0 else { throw Error("\(inbox): cannot be opened: \(String(cString: strerror(errno)))") }
        let folder = OutputStore.Folder(fd: folderFD, path: inbox)
        do {
            let copy = try TemporaryFile(folder: folder, mode: fileMode)
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
            defer { buffer.deallocate() }
            while true {
                let n = read(source, buffer.baseAddress!, buffer.count)
                if n < 0 && errno == EINTR { continue }
                guard n >= 0 else { throw Error("\(file): cannot be read: \(String(cString: strerror(errno)))") }
                if n == 0 { break }
                try copy.append(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            }
            let queued = try copy.commit(durablyBy: { path in try FileSystem.moveKeepingBoth(path, into: inbox, name: base) })
            try Durability.syncFolder(fd: folderFD, path: inbox)
            return queued
        } catch let error as Error {
            throw error
        } catch {
            throw Error("\(file): could not be queued: \(error)")
        }
    }

    /// Asks every watcher of this spool to cancel `key`: its running task, and its jobs in files
    /// written before now.
    package func requestCancel(key: String) throws(Error) -> String {
        try makeFolders()
        let path = "\(cancel)/\(OutputStore.fileName(forKey: key))"
        do {
            try FileSystem.writeAtomically(Array((key + "\n").utf8), to: path, mode: fileMode)
        } catch {
            throw Error("could not write the cancel request: \(error)")
        }
        return path
    }

    // MARK: - Names

    /// Whether a name in inbox/ is a job file to take (dot-names are files still being written).
    static func isCandidate(_ name: String) -> Bool { !name.hasPrefix(".") }

    /// Whether a name in done/ or failed/ is a job file rather than what lies beside one.
    static func isJobFile(_ name: String) -> Bool {
        !name.hasPrefix(".") && !name.hasSuffix(resultsSuffix) && !name.hasSuffix(errorSuffix)
    }
}
