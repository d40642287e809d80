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
/// Folders are made on demand. Every move is a rename inside the spool, so a file is always
/// in exactly one folder, and a reader never sees half of one.
public struct Spool: Sendable {
    /// A spool problem in words: a folder that cannot be made, a file that cannot be placed.
    public struct Error: Swift.Error, CustomStringConvertible {
        public var description: String
        init(_ description: String) { self.description = description }
    }

    /// The spool folder, absolute.
    public let root: String

    public var inbox: String { root + "/inbox" }
    public var active: String { root + "/active" }
    public var done: String { root + "/done" }
    public var failed: String { root + "/failed" }
    public var cancel: String { root + "/cancel" }
    public var locks: String { root + "/locks" }

    /// Beside a file in done/ or failed/: its result records, one per top-level job.
    public static let resultsSuffix = ".results.jsonl"
    /// Beside a file in failed/: why.
    public static let errorSuffix = ".error.txt"

    public init(root: String) {
        let absolute = root.hasPrefix("/") ? root : FileManager.default.currentDirectoryPath + "/" + root
        self.root = (absolute as NSString).standardizingPath
    }

    /// Makes the spool and its folders where they are missing.
    public func makeFolders() throws(Error) {
        do {
            try OutputStore.makeDirectory(root)
            for folder in [inbox, active, done, failed, cancel, locks] { try FileSystem.makeFolder(folder) }
        } catch {
            throw Error("cannot use the spool '\(root)': \(error)")
        }
    }

    // MARK: - Producing

    /// Copies `file` into inbox/ atomically (a dot-named copy, then a rename that never
    /// replaces a waiting file) and returns the name it got there.
    public func submit(file: String) throws(Error) -> String {
        try makeFolders()
        let name = (file as NSString).lastPathComponent
        let base = name.hasPrefix(".") ? "_" + name.dropFirst() : name
        guard let data = FileManager.default.contents(atPath: file) else {
            throw Error("\(file): cannot be read")
        }
        let temporary = "\(inbox)/.submit-\(UUID().uuidString)"
        do {
            try FileSystem.writeAtomically([UInt8](data), to: temporary)
            return try FileSystem.moveKeepingBoth(temporary, into: inbox, name: base)
        } catch {
            unlink(temporary)
            throw Error("\(file): could not be queued: \(error)")
        }
    }

    /// Asks every watcher of this spool to cancel `key`: its running task, and its jobs in files
    /// written before now.
    public func requestCancel(key: String) throws(Error) -> String {
        try makeFolders()
        let path = "\(cancel)/\(OutputStore.fileName(forKey: key))"
        do {
            try FileSystem.writeAtomically(Array((key + "\n").utf8), to: path)
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
