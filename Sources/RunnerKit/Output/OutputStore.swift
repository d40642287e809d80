import Foundation
import Glibc
import Synchronization

/// The output directory: payloads, result records and run logs, all written atomically
/// (a temporary file in the same folder, then rename), and never outside the directory.
///
/// Confinement: relative paths never climb (`..` is refused when a job is read, and again
/// here), and the folders inside the directory are made and checked one level at a time
/// without following links: a symbolic link planted where a folder should be (`out/images ->
/// /elsewhere`) is refused with an error, never written through. A link at a payload's own
/// path is replaced by the rename. The output directory itself may be a link.
///
/// ```
/// out/
///   images/ trees/ entries/ lists/ json/   payloads (a kind's folder)
///   results/<name>.json                    the last result of each key
///   runs/<run-id>.jsonl                    one line per finished job of one run
///   .locks/keys                            a byte locked per running key (`keyLock`)
/// ```
public final class OutputStore: Sendable {
    /// A write that failed, in words a user can act on.
    public struct WriteError: Error, CustomStringConvertible {
        /// The path that could not be written: absolute as a rule, relative to the output directory
        /// when a payload's own path was refused.
        public var path: String
        /// Why, in words a user can act on; `description` puts it after the path.
        public var reason: String
        /// The system's `errno`, when a system call failed.
        public var code: Int32?
        public var description: String { "could not write \(path): \(reason)" }

        /// A failure to write `path` for `reason`, with no `errno`.
        package init(path: String, reason: String) {
            self.path = path
            self.reason = reason
        }

        /// The failure of a system call, by its `errno`.
        package init(path: String, errno code: Int32) {
            self.init(path: path, reason: Self.reason(errno: code))
            self.code = code
        }

        /// What an `errno` means for a write, in words a user can act on.
        package static func reason(errno code: Int32) -> String {
            switch code {
            case ENOSPC: return "no space left on the device (free some space, or write to a larger disk)"
            case EDQUOT: return "the disk quota is exceeded (free some space, or write elsewhere)"
            case EROFS: return "the file system is read-only"
            case EACCES, EPERM: return "permission denied (check who owns the output directory)"
            case ELOOP: return "it is a symbolic link, which the runner never writes through"
            default: return String(cString: strerror(code))
            }
        }
    }

    /// The output directory, absolute.
    public let root: String
    let rootFolder: Folder
    /// Folders already made and checked, by relative path, each held open.
    private let folders = Mutex<[String: Folder]>([:])
    /// Hears the key of each partial download whose kept bytes were synced and named in its
    /// sidecar: durable progress (a shared queue does not count such a claim as an abandon).
    private let checkpointHearer = Mutex<(@Sendable (String) -> Void)?>(nil)
    /// What is known of the sidecars of kept partials in each payload folder, by folder, once
    /// `listsSidecars()` was called (nil before: every look asks the file system).
    let sidecars = Mutex<[String: SidecarsKnown]?>(nil)
    /// The bytes the kept partials of cut transfers may take together (`--keep-partials`):
    /// keeping one past it removes the oldest first.
    package let partialBudget = Atomic<Int>(PartialDownload.defaultBudget)
    /// How many folders stay open at most; past that, a folder is opened for each write.
    static let openFolderLimit = 256

    /// The store at `root` (relative to the working directory unless absolute), made with its
    /// `results/` folder when missing.
    /// - Throws: `WriteError` when the directory cannot be made or opened.
    public init(root: String) throws {
        let absolute = root.hasPrefix("/") ? root : FileManager.default.currentDirectoryPath + "/" + root
        self.root = (absolute as NSString).standardizingPath
        try Self.makeDirectory(self.root)
        let fd = open(self.root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw WriteError(path: self.root, errno: errno) }
        self.rootFolder = Folder(fd: fd, path: self.root)
        try makeFolder("results")
    }

    /// `hear` gets the key of each partial download whose synced bytes a sidecar now names.
    package func onPartialCheckpoint(_ hear: @escaping @Sendable (String) -> Void) { checkpointHearer.withLock { $0 = hear } }

    func partialCheckpointed(key: String) {
        guard let hear = checkpointHearer.withLock({ $0 }) else { return }
        hear(key)
    }

    /// The absolute path of a payload path relative to the root.
    package func absolute(_ relativePath: String) -> String { root + "/" + relativePath }

    // MARK: - Payloads

    /// A new, empty temporary file in the folder `relativeFolder` (created on demand).
    package func makeTemporaryFile(in relativeFolder: String) throws -> TemporaryFile {
        let folder = try openFolder(relativeFolder)
        do {
            return try TemporaryFile(folder: folder)
        } catch where error.code == ENOENT {
            // The folder was removed while held open: make it again, once.
            forgetFolder(relativeFolder)
            return try TemporaryFile(folder: openFolder(relativeFolder))
        }
    }

    /// Moves a complete temporary file to `relativePath`, replacing what was there
    /// (a symlink there is replaced, never written through).
    package func commit(_ file: TemporaryFile, to relativePath: String) throws {
        let name = try Self.fileName(of: relativePath)
        try file.commit(to: openFolder(Self.folder(of: relativePath)), name: name)
    }

    /// Writes `bytes` to `relativePath` atomically.
    package func write(_ bytes: [UInt8], to relativePath: String) throws {
        let file = try makeTemporaryFile(in: Self.folder(of: relativePath))
        try file.append(bytes)
        try commit(file, to: relativePath)
    }

    package func fileExists(_ relativePath: String) -> Bool {
        fileSize(relativePath) != nil
    }

    /// The size of a regular file in the store (a link is not followed), or nil.
    package func fileSize(_ relativePath: String) -> Int? {
        var info = stat()
        guard lstat(absolute(relativePath), &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int(info.st_size)
    }

    // MARK: - Records

    /// `results/<name>.json` for a key.
    public func recordPath(forKey key: String) -> String { "results/" + Self.recordFileName(forKey: key) }

    /// Writes the key's last result atomically.
    package func writeRecord(_ result: JobResult) throws {
        try writeRecord(result.json, key: result.key)
    }

    /// Writes a record already made JSON (`JobResult.json`) as the key's last result.
    package func writeRecord(_ record: JSONValue, key: String) throws {
        try writeRecord(record, fileName: Self.recordFileName(forKey: key))
    }

    /// Writes a record as `results/<fileName>` (a name from `recordFileName(forKey:)`, made
    /// once per job: it hashes the key).
    func writeRecord(_ record: JSONValue, fileName: String) throws {
        var bytes = JSONWriter.data(record)
        bytes.append(0x0A)
        try write(bytes, to: "results/" + fileName)
    }

    /// Writes a record already made one line of JSON (ending in a newline) as `results/<fileName>`:
    /// from the slice as it is, in the held-open folder, with no path made (once per job).
    func writeRecord(line: ArraySlice<UInt8>, fileName: String) throws {
        let file = try makeTemporaryFile(in: "results")
        try line.withUnsafeBytes { try file.append($0) }
        try file.commit(to: openFolder("results"), name: fileName)
    }

    /// The key's last result record, if one exists and parses.
    public func readRecord(forKey key: String) -> JSONValue? {
        readRecord(fileName: Self.recordFileName(forKey: key))
    }

    /// The record `results/<fileName>`, if it exists and parses.
    func readRecord(fileName: String) -> JSONValue? {
        guard let results = try? openFolder("results"), let bytes = Self.readFile(in: results.fd, fileName) else { return nil }
        return try? JSONParser.parse(bytes)
    }

    /// The names of the record files in `results/` now (one directory read).
    func recordFileNames() -> [String] {
        FolderReader.names(in: root + "/results").filter { $0.hasSuffix(".json") && !$0.hasPrefix(".") }
    }

    /// The name of a key's record file in `results/`.
    static func recordFileName(forKey key: String) -> String { fileName(forKey: key, suffix: ".json") }

    // MARK: - Names

    /// A key made filename-safe: letters, digits and `._-` stay; anything else becomes `_`.
    /// When that changed the key (or it was long), a short hash of the key is appended, so two
    /// different keys never share a file.
    package static func fileName(forKey key: String) -> String { fileName(forKey: key, suffix: "") }

    /// `fileName(forKey:)` and `suffix` after it, made as one string (a name is made for every
    /// job's record and payload).
    private static func fileName(forKey key: String, suffix: StaticString) -> String {
        var key = key
        return key.withUTF8 { bytes in
            // Byte-wise, as every kept character is ASCII: any other byte (a part of a UTF-8
            // sequence) becomes `_`, one per character.
            var changed = bytes.isEmpty || bytes.count > 100 || bytes[0] == UInt8(ascii: ".")
            let hashLength = 11  // "-" and ten hex digits
            return String(unsafeUninitializedCapacity: min(bytes.count, 100) + hashLength + suffix.utf8CodeUnitCount) { out in
                var count = 0
                var index = 0
                while index < bytes.count {
                    let byte = bytes[index]
                    var kept = byte
                    index += 1
                    switch byte {
                    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                        UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                        break
                    default:
                        kept = UInt8(ascii: "_")
                        changed = true
                        if byte >= 0xC0 { while index < bytes.count, bytes[index] & 0xC0 == 0x80 { index += 1 } }
                    }
                    if count < 100 {
                        out[count] = kept
                        count += 1
                    }
                }
                if count > 0, out[0] == UInt8(ascii: ".") { out[0] = UInt8(ascii: "_") }
                if changed {
                    out[count] = UInt8(ascii: "-")
                    count += 1
                    for digit in SHA256.hex(bytes).utf8.prefix(hashLength - 1) {
                        out[count] = digit
                        count += 1
                    }
                }
                suffix.withUTF8Buffer { tail in
                    for byte in tail {
                        out[count] = byte
                        count += 1
                    }
                }
                return count
            }
        }
    }

    // MARK: - Confinement

    /// Makes the folder `relativeFolder` ("" for the root) and those on its way, one level at a
    /// time, without following links; answers its absolute path. A symbolic link or a file
    /// where a folder should be, or a `..`, is refused: nothing is ever written outside the root.
    @discardableResult
    package func makeFolder(_ relativeFolder: String) throws -> String {
        try openFolder(relativeFolder).path
    }

    /// An open folder inside the root, made on demand (see `makeFolder`). Checked once, then
    /// held open: later writes there go through its descriptor and check nothing again.
    func openFolder(_ relativeFolder: String) throws(WriteError) -> Folder {
        if relativeFolder.isEmpty { return rootFolder }
        if let folder = folders.withLock({ $0[relativeFolder] }) { return folder }
        var folder = rootFolder
        var relative = ""
        for part in relativeFolder.split(separator: "/") where part != "." {
            guard part != ".." else {
                throw WriteError(path: absolute(relativeFolder), reason: "the path climbs out of the output directory")
            }
            relative += relative.isEmpty ? String(part) : "/" + part
            if let known = folders.withLock({ $0[relative] }) {
                folder = known
                continue
            }
            folder = try Self.openChild(String(part), of: folder)
            let opened = folder
            folders.withLock { folders in
                if folders.count < Self.openFolderLimit { folders[relative] = opened }
            }
        }
        return folder
    }

    /// Drops a folder from the open ones after it was found removed, with those below it and
    /// those on its way (any of which may be what was removed).
    private func forgetFolder(_ relativeFolder: String) {
        folders.withLock { folders in
            folders = folders.filter { $0.key != relativeFolder && !$0.key.hasPrefix(relativeFolder + "/") && !relativeFolder.hasPrefix($0.key + "/") }
        }
    }

    /// Opens (making it if missing) the folder `name` in `parent`, never following a link.
    private static func openChild(_ name: String, of parent: Folder) throws(WriteError) -> Folder {
        let path = parent.path + "/" + name
        let flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
        var fd = openat(parent.fd, name, flags)
        if fd < 0 && errno == ENOENT {
            guard mkdirat(parent.fd, name, 0o755) == 0 || errno == EEXIST else {
                throw WriteError(path: path, reason: "could not create the folder (\(WriteError.reason(errno: errno)))")
            }
            fd = openat(parent.fd, name, flags)
        }
        guard fd >= 0 else {
            let code = errno
            var info = stat()
            if fstatat(parent.fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0 {
                if (info.st_mode & S_IFMT) == S_IFLNK {
                    throw WriteError(
                        path: path,
                        reason: "it is a symbolic link, and the runner never writes through a link inside the output directory (make it a real folder, or use another output directory)")
                }
                if (info.st_mode & S_IFMT) != S_IFDIR { throw WriteError(path: path, reason: "it exists and is not a folder") }
            }
            throw WriteError(path: path, reason: "could not open the folder (\(WriteError.reason(errno: code)))")
        }
        return Folder(fd: fd, path: path)
    }

    /// A folder held open by its descriptor, closed when the last user lets go.
    final class Folder: Sendable {
        let fd: Int32
        /// Absolute, for messages.
        let path: String

        init(fd: Int32, path: String) {
            self.fd = fd
            self.path = path
        }

        deinit { close(fd) }
    }

    /// The existing folder `relativeFolder` ("" for the root), opened one level at a time from
    /// the root's descriptor without following links and without making anything; nil when a
    /// part is missing, a link, not a folder, or `..`. What `forget` removes files through.
    func openExistingFolder(_ relativeFolder: String) -> Folder? {
        var folder = rootFolder
        for part in relativeFolder.split(separator: "/") where part != "." {
            guard part != ".." else { return nil }
            let fd = openat(folder.fd, String(part), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard fd >= 0 else { return nil }
            folder = Folder(fd: fd, path: folder.path + "/" + part)
        }
        return folder
    }

    /// Removes the regular file at `relativePath` through the descriptor of its folder (see
    /// `openExistingFolder`): a link, on the way or at the file, is never followed or removed.
    func removeFile(_ relativePath: String) -> Bool {
        guard let name = try? Self.fileName(of: relativePath), name != ".", let folder = openExistingFolder(Self.folder(of: relativePath))
        else { return false }
        var info = stat()
        guard fstatat(folder.fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return false }
        return unlinkat(folder.fd, name, 0) == 0
    }

    /// The folder part of a relative path ("" for a bare name); plain string work, no bridging.
    package static func folder(of relativePath: String) -> String {
        guard let slash = relativePath.utf8.lastIndex(of: UInt8(ascii: "/")) else { return "" }
        return String(relativePath[..<slash])
    }

    /// The bytes of the file `name` in the folder open as `folder` (or at the path `name` for
    /// AT_FDCWD), never through a link; nil when it cannot be read (most often: it does not exist).
    static func readFile(in folder: Int32, _ name: String) -> [UInt8]? {
        let fd = name.withCString { openat(folder, $0, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) }  // a record read per job on a rerun
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        let expected = fstat(fd, &info) == 0 && info.st_size > 0 ? Int(info.st_size) : 0
        var bytes: [UInt8] = []
        bytes.reserveCapacity(expected + 1)
        var chunk = [UInt8](repeating: 0, count: max(expected + 1, 4096))
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { return nil }
            if n == 0 { return bytes }
            bytes.append(contentsOf: chunk[0..<n])
        }
    }

    private static func fileName(of relativePath: String) throws -> String {
        let name = relativePath.utf8.lastIndex(of: UInt8(ascii: "/")).map { String(relativePath[relativePath.utf8.index(after: $0)...]) } ?? relativePath
        guard !name.isEmpty, name != ".", name != "..", !relativePath.hasSuffix("/") else {
            throw WriteError(path: relativePath, reason: "the path does not name a file")
        }
        return name
    }

    // MARK: - Helpers

    static func makeDirectory(_ path: String) throws {
        var info = stat()
        if stat(path, &info) == 0 {
            guard (info.st_mode & S_IFMT) == S_IFDIR else { throw WriteError(path: path, reason: "it exists and is not a directory") }
            return
        }
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        } catch {
            throw WriteError(path: path, reason: "could not create the directory (\(WriteError.reason(errno: errno)))")
        }
    }
}
