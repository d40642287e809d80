import Foundation
import RunnerKit

/// `file`: any file, its body stored as it comes under `files/`, with defaults fit for large
/// ones. A large body takes long: the deadline of an attempt is a day instead of 2 s, so only a
/// body that stops moving ends an attempt (`stall`, 30 s of less than `lowSpeed` bytes a
/// second), and the attempt after it resumes; `maxBytes` is 16 GiB instead of 64 MiB.
public struct FileKind: JobKind {
    public static let name = "file"
    public static let summary = "Fetches any file and stores its body as it comes, under files/; made for large files: a day's timeout (a stall of 30 s ends a dead attempt) and maxBytes 16 GiB by default."
    public static let parameters = [
        KindParameter("name", type: .string, "A name for the file: its key is file:<name> and it is stored as files/<name>.<extension> (default: the key is file:<url>)."),
    ]
    public static let defaultTimeout: Duration? = .seconds(86_400)
    public static let defaultMaxBytes: Int? = 16 << 30

    /// The job's `name`, if it gave one.
    public let fileName: String?

    /// A file job's parameters: with `name`, its key is `file:<name>` and its payload
    /// `files/<name>.<extension>`; nil: its key is `file:<url>`.
    public init(name: String? = nil) { fileName = name }

    public init(fields: inout JobFields) throws(JobSpecError) {
        fileName = try fields.string("name")
        if let fileName, fileName.isEmpty { throw JobSpecError(field: "name", "must not be empty") }
    }

    public func defaultKey(kind: String, url: String) -> String { "file:\(fileName ?? url)" }

    public func run(in context: JobContext) async throws -> KindOutcome {
        let fetch = try await context.fetch(folder: "files")
        return .fetched(fetch, folder: "files", fileExtension: Self.fileExtension(of: context.job.url))
    }

    /// The URL's own extension when it is a plain one (letters and digits, at most 8, lowercased:
    /// `zip`, `tar.gz` gives `gz`), else `bin`.
    static func fileExtension(of url: URL) -> String {
        let ext = url.pathExtension.lowercased()
        guard (1...8).contains(ext.utf8.count), ext.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x7A).contains($0) }) else {
            return "bin"
        }
        return ext
    }
}
