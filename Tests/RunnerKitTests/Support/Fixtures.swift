import Foundation
import RunnerKit
import RunnerTestSupport

/// A throwaway folder per test, removed when the value goes away.
final class TemporaryFolder: @unchecked Sendable {
    let path: String

    init() {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("runner-tests-\(UUID().uuidString)").path
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    @discardableResult
    func write(_ name: String, _ text: String) -> String {
        write(name, bytes: Array(text.utf8))
    }

    @discardableResult
    func write(_ name: String, bytes: [UInt8]) -> String {
        let file = "\(path)/\(name)"
        _ = FileManager.default.createFile(atPath: file, contents: Data(bytes))
        return file
    }

    /// Every file below the folder, relative paths, sorted.
    func files() -> [String] {
        (FileManager.default.enumerator(atPath: path)?.allObjects as? [String] ?? [])
            .filter { name in
                var isDirectory: ObjCBool = false
                return FileManager.default.fileExists(atPath: "\(path)/\(name)", isDirectory: &isDirectory) && !isDirectory.boolValue
            }
            .sorted()
    }
}

/// A kind for tests of the engine's decoding: takes an optional `flavor` string.
struct ProbeKind: JobKind {
    static let name = "probe"
    static let summary = "A kind for tests."
    static let parameters = [KindParameter("flavor", type: .string, "A field of this kind only.")]
    let flavor: String?

    init(flavor: String? = nil) { self.flavor = flavor }

    init(fields: inout JobFields) throws(JobSpecError) {
        flavor = try fields.string("flavor")
    }

    func run(in context: JobContext) async throws -> KindOutcome { KindOutcome(.bytes([], httpStatus: 200), folder: "probes", fileExtension: "txt") }
}

func probeRegistry() -> KindRegistry {
    var registry = KindRegistry()
    try? registry.register(ProbeKind.self)
    return registry
}

/// Keeps every record the engine reports.
struct RecordsObserver: RunObserver {
    let records: Watched<[JobResult]>
    func jobFinished(_ result: JobResult) { records.update { $0.append(result) } }
}
