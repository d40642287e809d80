import Foundation
import Glibc
import RunnerKit

/// The FILE arguments of `run`, `validate` and `submit`, where `-` is standard input.
///
/// Standard input can be read only once, but `run` reads its files twice (validate, then run)
/// and `submit` copies them: so it is copied once, in full, to a temporary file named
/// `stdin.json` or `stdin.jsonl` by what it holds (`JobFileArguments.looksLikeJSONLines`), and
/// messages call it `(stdin)`. The temporary folder is removed by `remove()`.
struct JobFileArguments {
    /// How messages name standard input.
    static let displayName = "(stdin)"

    /// The paths to read, in the order given.
    let files: [String]
    /// Path → name for messages (only standard input's copy has one).
    let displayNames: [String: String]
    private let temporaryFolder: String?

    /// Copies standard input if `-` is among `arguments`; `-` may be given once.
    init(_ arguments: [String]) throws(UsageError) {
        guard arguments.contains("-") else {
            files = arguments
            displayNames = [:]
            temporaryFolder = nil
            return
        }
        guard arguments.count(where: { $0 == "-" }) == 1 else {
            throw UsageError("'-' (standard input) may be given once")
        }
        let copy: (folder: String, file: String)
        do {
            copy = try Self.copyStandardInput()
        } catch {
            throw UsageError("\(Self.displayName): \(error)")
        }
        files = arguments.map { $0 == "-" ? copy.file : $0 }
        displayNames = [copy.file: Self.displayName]
        temporaryFolder = copy.folder
    }

    /// The name of `file` in messages.
    func display(_ file: String) -> String { displayNames[file] ?? file }

    /// `message` with standard input's temporary path replaced by its display name.
    func display(message: String) -> String {
        var message = message
        for (path, name) in displayNames { message = message.replacingOccurrences(of: path, with: name) }
        return message
    }

    /// Removes the copy of standard input, if one was made.
    func remove() {
        if let temporaryFolder { try? FileManager.default.removeItem(atPath: temporaryFolder) }
    }

    // MARK: - Copying

    struct CopyError: Error, CustomStringConvertible {
        var description: String
    }

    private static func copyStandardInput() throws(CopyError) -> (folder: String, file: String) {
        var template = Array((FileManager.default.temporaryDirectory.path + "/runner-stdin-XXXXXX").utf8CString)
        guard let folderPointer = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw CopyError(description: "could not make a temporary folder: \(String(cString: strerror(errno)))")
        }
        let folder = String(cString: folderPointer)
        let partial = "\(folder)/stdin"
        let fd = open(partial, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            try? FileManager.default.removeItem(atPath: folder)
            throw CopyError(description: "could not make a temporary file: \(String(cString: strerror(errno)))")
        }
        var sniffer = Sniffer()
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var failure: String?
        copying: while true {
            let count = buffer.withUnsafeMutableBytes { read(0, $0.baseAddress!, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count < 0 {
                failure = "cannot be read: \(String(cString: strerror(errno)))"
                break
            }
            if count == 0 { break }
            sniffer.look(at: buffer[..<count])
            var offset = 0
            while offset < count {
                let written = buffer.withUnsafeBytes { write(fd, $0.baseAddress! + offset, count - offset) }
                if written < 0 && errno == EINTR { continue }
                if written <= 0 {
                    failure = "could not be copied to a temporary file: \(String(cString: strerror(errno)))"
                    break copying
                }
                offset += written
            }
        }
        close(fd)
        let file = "\(folder)/stdin.\(sniffer.isJSONLines ? "jsonl" : "json")"
        if failure == nil && rename(partial, file) != 0 { failure = "could not be copied: \(String(cString: strerror(errno)))" }
        if let failure {
            try? FileManager.default.removeItem(atPath: folder)
            throw CopyError(description: failure)
        }
        return (folder, file)
    }

    /// Tells JSON Lines from one JSON document by content, as it streams past: JSON Lines when
    /// the first line that is not blank is a whole JSON object on its own and more text follows
    /// it. A pretty-printed object or an array is a document; so is a single one-line job.
    struct Sniffer {
        private var firstLine: [UInt8] = []
        private var firstLineDone = false
        private var firstLineIsObject = false
        private var moreFollows = false

        /// Longest first line looked at (a JSON Lines line may be at most 16 MiB).
        private static let maxFirstLine = 16 << 20

        mutating func look(at bytes: ArraySlice<UInt8>) {
            var index = bytes.startIndex
            while !firstLineDone && index < bytes.endIndex {
                let byte = bytes[index]
                index += 1
                if byte == 0x0A {
                    if firstLine.allSatisfy(Self.isSpace) {
                        firstLine.removeAll()
                        continue
                    }
                    finishFirstLine()
                } else if firstLine.count < Self.maxFirstLine {
                    firstLine.append(byte)
                } else {
                    finishFirstLine()
                }
            }
            if firstLineDone && !moreFollows {
                moreFollows = bytes[index...].contains { !Self.isSpace($0) }
            }
        }

        var isJSONLines: Bool { firstLineDone && firstLineIsObject && moreFollows }

        private mutating func finishFirstLine() {
            firstLineDone = true
            firstLineIsObject = JobFileFormat.isObjectLine(firstLine)
            firstLine = []
        }

        private static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A }
    }
}
