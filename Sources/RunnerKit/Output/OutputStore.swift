import Foundation
import Glibc

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
///   images/ trees/ entries/ lists/   payloads
///   results/<name>.json              the last result of each key
///   runs/<run-id>.jsonl              one line per finished job of one run
/// ```
public final class OutputStore: Sendable {
    /// A write that failed, in words a user can act on.
    public struct WriteError: Error, CustomStringConvertible {
        public var path: String
        public var reason: String
        public var description: String { "could not write \(path): \(reason)" }

        public init(path: String, reason: String) {
            self.path = path
            self.reason = reason
        }

        /// The failure of a system call, by its `errno`.
        public init(path: String, errno code: Int32) {
            self.init(path: path, reason: Self.reason(errno: code))
        }

        /// What an `errno` means for a write, in words a user can act on.
        public static func reason(errno code: Int32) -> String {
            switch code {
            case ENOSPC: return "no space left on the device (free some space, or point --out at a larger disk)"
            case EDQUOT: return "the disk quota is exceeded (free some space, or point --out elsewhere)"
            case EROFS: return "the file system is read-only"
            case EACCES, EPERM: return "permission denied (check who owns the output directory)"
            case ELOOP: return "it is a symbolic link, which the runner never writes through"
            default: return String(cString: strerror(code))
            }
        }
    }

    /// The output directory, absolute.
    public let root: String

    public init(root: String) throws {
        let absolute = root.hasPrefix("/") ? root : FileManager.default.currentDirectoryPath + "/" + root
        self.root = (absolute as NSString).standardizingPath
        try Self.makeDirectory(self.root)
        try makeFolder("results")
    }

    /// The absolute path of a payload path relative to the root.
    public func absolute(_ relativePath: String) -> String { root + "/" + relativePath }

    // MARK: - Payloads

    /// A new, empty temporary file in the folder `relativeFolder` (created on demand).
    public func makeTemporaryFile(in relativeFolder: String) throws -> TemporaryFile {
        try TemporaryFile(folder: makeFolder(relativeFolder))
    }

    /// Moves a complete temporary file to `relativePath`, replacing what was there
    /// (a symlink there is replaced, never written through).
    public func commit(_ file: TemporaryFile, to relativePath: String) throws {
        let name = try Self.fileName(of: relativePath)
        let folder = try makeFolder(Self.folder(of: relativePath))
        try file.commit(to: folder + "/" + name)
    }

    /// Writes `bytes` to `relativePath` atomically.
    public func write(_ bytes: [UInt8], to relativePath: String) throws {
        let file = try makeTemporaryFile(in: Self.folder(of: relativePath))
        try file.append(bytes)
        try commit(file, to: relativePath)
    }

    public func fileExists(_ relativePath: String) -> Bool {
        var info = stat()
        return lstat(absolute(relativePath), &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG
    }

    // MARK: - Records

    /// `results/<name>.json` for a key.
    public func recordPath(forKey key: String) -> String { "results/\(Self.fileName(forKey: key)).json" }

    /// Writes the key's last result atomically.
    public func writeRecord(_ result: JobResult) throws {
        var bytes = JSONWriter.data(result.json, pretty: true)
        bytes.append(0x0A)
        try write(bytes, to: recordPath(forKey: result.key))
    }

    /// The key's last result record, if one exists and parses.
    public func readRecord(forKey key: String) -> JSONValue? {
        guard let bytes = Self.readFile(absolute(recordPath(forKey: key))) else { return nil }
        return try? JSONParser.parse(bytes)
    }

    // MARK: - Names

    /// A key made filename-safe: letters, digits and `._-` stay; anything else becomes `_`.
    /// When that changed the key (or it was long), a short hash of the key is appended, so two
    /// different keys never share a file.
    public static func fileName(forKey key: String) -> String {
        var out = ""
        var changed = false
        for scalar in key.unicodeScalars {
            switch scalar {
            case "a"..."z", "A"..."Z", "0"..."9", ".", "_", "-": out.unicodeScalars.append(scalar)
            default:
                out.append("_")
                changed = true
            }
        }
        if out.hasPrefix(".") {
            out = "_" + out.dropFirst()
            changed = true
        }
        if out.utf8.count > 100 {
            out = String(out.prefix(100))
            changed = true
        }
        if out.isEmpty { changed = true }
        if changed { out += "-" + String(SHA256.hex(Array(key.utf8)).prefix(10)) }
        return out
    }

    // MARK: - Confinement

    /// Makes the folder `relativeFolder` ("" for the root) and those on its way, one level at a
    /// time, without following links; answers its absolute path. A symbolic link or a file
    /// where a folder should be, or a `..`, is refused: nothing is ever written outside the root.
    @discardableResult
    public func makeFolder(_ relativeFolder: String) throws -> String {
        var path = root
        for part in relativeFolder.split(separator: "/") where part != "." {
            guard part != ".." else {
                throw WriteError(path: absolute(relativeFolder), reason: "the path climbs out of the output directory")
            }
            path += "/" + part
            var info = stat()
            if lstat(path, &info) != 0 {
                guard errno == ENOENT, mkdir(path, 0o755) == 0 || errno == EEXIST, lstat(path, &info) == 0 else {
                    throw WriteError(path: path, reason: "could not create the folder (\(WriteError.reason(errno: errno)))")
                }
            }
            switch info.st_mode & S_IFMT {
            case S_IFDIR:
                continue
            case S_IFLNK:
                throw WriteError(
                    path: path,
                    reason: "it is a symbolic link, and the runner never writes through a link inside the output directory (make it a real folder, or point --out elsewhere)")
            default:
                throw WriteError(path: path, reason: "it exists and is not a folder")
            }
        }
        return path
    }

    /// Whether every folder on the way to `relativePath` is a real folder inside the root
    /// (no link, no `..`): what `forget` checks before it removes anything.
    func isConfined(_ relativePath: String) -> Bool {
        var path = root
        let parts = relativePath.split(separator: "/").filter { $0 != "." }
        for part in parts.dropLast() {
            guard part != ".." else { return false }
            path += "/" + part
            var info = stat()
            guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else { return false }
        }
        return parts.last.map { $0 != ".." } ?? false
    }

    /// The folder part of a relative path ("" for a bare name); plain string work, no bridging.
    public static func folder(of relativePath: String) -> String {
        guard let slash = relativePath.utf8.lastIndex(of: UInt8(ascii: "/")) else { return "" }
        return String(relativePath[..<slash])
    }

    /// A small file's bytes, or nil when it cannot be read (it does not exist, most often).
    static func readFile(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { return nil }
            if n == 0 { return bytes }
            bytes.append(contentsOf: chunk[0..<n])
        }
    }

    private static func fileName(of relativePath: String) throws -> String {
        let name = relativePath.split(separator: "/", omittingEmptySubsequences: false).last.map(String.init) ?? ""
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
