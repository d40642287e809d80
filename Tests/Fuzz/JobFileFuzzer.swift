// libFuzzer target over the job-file decoder: JSONParser, JobDescriptor.decode (through
// JobFileReader, in both the document and the JSON Lines forms) and the writer that turns a
// parsed value back into text. Built by run.sh together with RunnerKit's sources into one module;
// not part of the package.
import Foundation

/// A kind with one integer, one string and one boolean field, so field decoding is exercised.
struct FuzzKind: JobKind {
    static let name = "fuzz"
    static let summary = "A kind for fuzzing."
    static let parameters = [
        KindParameter("id", type: .string, "A string."),
        KindParameter("count", type: .int, "A number."),
    ]
    let id: String?
    let count: Int?

    init(fields: inout JobFields) throws(JobSpecError) {
        id = try fields.string("id")
        count = try fields.int("count")
    }

    func resolveURL(_ template: String) -> String { template.replacingOccurrences(of: "{id}", with: id ?? "") }

    func run(in context: JobContext) async throws -> KindOutcome { KindOutcome(.bytes([], httpStatus: 200), folder: "probes", fileExtension: "txt") }
}

private let registry: KindRegistry = {
    var registry = KindRegistry()
    try? registry.register(FuzzKind.self)
    return registry
}()

private let folder: String = {
    let path = "/dev/shm/runner-fuzz-\(getpid())"
    mkdir(path, 0o700)
    return path
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJobFile(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    // The parser alone, and a round trip through the writer for what it accepts.
    if let value = try? JSONParser.parse(bytes) {
        let text = JSONWriter.data(value)
        guard let again = try? JSONParser.parse(text), again == value else {
            fatalError("the writer's output of a parsed value does not parse back to the same value")
        }
    }
    // The reader on a file, as a document and as JSON Lines.
    for name in ["jobs.json", "jobs.jsonl"] {
        let path = "\(folder)/\(name)"
        _ = FileManager.default.createFile(atPath: path, contents: Data(bytes))
        let (count, errors) = JobFileReader.validate(path: path, registry: registry)
        for error in errors {
            let sentence = error.description
            if sentence.isEmpty || sentence.contains("\n") {
                fatalError("an error is not one line: \(sentence.debugDescription)")
            }
        }
        _ = count
    }
    return 0
}
