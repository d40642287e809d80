import Foundation
import RunnerKinds
import RunnerKit
import Testing

/// The fuzzers' seeds and every input that once found a bug (Tests/Fuzz/corpus/), fed to the same
/// code the fuzz targets drive: each must be answered (a value or an error), never trap.
@Suite struct FuzzCorpusTests {
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz/corpus").path

    static func inputs(_ target: String) -> [String] {
        let folder = "\(corpus)/\(target)"
        return ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).sorted().map { "\(folder)/\($0)" }
    }

    struct Kind: JobKind {
        static let name = "fuzz"
        static let summary = "A kind for the fuzz corpus."
        static let parameters = [KindParameter("id", type: .string, "A string."), KindParameter("count", type: .int, "A number.")]
        init(fields: inout JobFields) throws(JobSpecError) {
            _ = try fields.string("id")
            _ = try fields.int("count")
        }
        func run(in context: JobContext) async throws -> KindOutcome { KindOutcome(.bytes([], httpStatus: 200), folder: "probes", fileExtension: "txt") }
    }

    @Test func jobFileInputsAreAnsweredInOneLineEach() throws {
        let inputs = Self.inputs("jobfile")
        #expect(!inputs.isEmpty)
        let registry = try KindRegistry([KindDefinition(Kind.self)])
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("runner-fuzz-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        for input in inputs {
            let bytes = try #require(FileManager.default.contents(atPath: input))
            if let value = try? JSONParser.parse([UInt8](bytes)) {
                #expect(try JSONParser.parse(JSONWriter.data(value)) == value, "round trip of \(input)")
            }
            for name in ["jobs.json", "jobs.jsonl"] {
                let path = "\(folder)/\(name)"
                _ = FileManager.default.createFile(atPath: path, contents: bytes)
                let report = JobFileReader.validate(path: path, registry: registry)
                for error in report.errors {
                    #expect(!error.description.contains("\n"), "\(input): \(error.description)")
                }
            }
        }
    }

    @Test func imageHeaderInputsAreAnswered() throws {
        let inputs = Self.inputs("imageheader")
        #expect(!inputs.isEmpty)
        for input in inputs {
            let bytes = [UInt8](try #require(FileManager.default.contents(atPath: input)))
            if let header = try? ImageHeader.parse(bytes) {
                #expect(header.width > 0 && header.height > 0, "\(input)")
            }
            for format in ImageFormat.allCases {
                _ = ImageHeader.isComplete(format, prefix: bytes, suffix: Array(bytes.suffix(64)), totalLength: bytes.count)
            }
            #expect(!ImageHeader.describe(bytes).isEmpty)
        }
    }

    /// The promise the image check's two-step read rests on, at every cut of every input: the
    /// first bytes of a body, with its whole length, parse to what the whole body parses to, or ask
    /// for more.
    @Test func imageHeaderFirstBytesAnswerAsTheWholeOrAskForMore() throws {
        for input in Self.inputs("imageheader") {
            let bytes = [UInt8](try #require(FileManager.default.contents(atPath: input)))
            let whole = Result { () throws(ImageHeader.Error) in try ImageHeader.parse(bytes) }
            for cut in min(12, bytes.count)..<bytes.count {
                do {
                    let header = try ImageHeader.parse(Array(bytes.prefix(cut)), totalLength: bytes.count)
                    #expect(whole == .success(header), "\(input) cut at \(cut)")
                } catch {
                    var bothNotImages = false
                    if case .notAnImage = error, case .failure(.notAnImage) = whole { bothNotImages = true }
                    #expect(error.wantsMoreBytes || whole == .failure(error) || bothNotImages, "\(input) cut at \(cut): \(error)")
                }
            }
        }
    }

    @Test func kindFileInputsAreAnsweredInOneLineEach() throws {
        let inputs = Self.inputs("kindfile")
        #expect(!inputs.isEmpty)
        var refused: [String: String] = [:]
        for input in inputs {
            let bytes = [UInt8](try #require(FileManager.default.contents(atPath: input)))
            do {
                let file = try KindFile.decode(bytes, path: input, fileStem: nil)
                var registry = BuiltInKinds.registry()
                try registry.register(file.definition())
                var fields: [(key: String, value: JSONValue)] = [("kind", .string(file.name)), ("url", .string("http://fuzz.test/{name}"))]
                for parameter in file.parameters where parameter.required {
                    fields.append((parameter.name, parameter.type == .bool ? .bool(true) : parameter.type == .string ? .string("a b") : .number(3)))
                }
                let job = try JobDescriptor.decode(fields, registry: registry)
                #expect(!job.key.isEmpty)
            } catch let error as JobSpecError {
                #expect(!error.description.contains("\n"), "\(input): \(error.description)")
                refused[URL(fileURLWithPath: input).lastPathComponent] = error.description
            }
        }
        // The hostile seeds are refused with a sentence, the examples accepted.
        #expect(refused["deep-template"]?.contains("nests deeper than 8 levels") == true, "\(refused)")
        #expect(refused["long-pointer"]?.contains("longer than 1024 bytes") == true, "\(refused)")
        #expect(refused["many-placeholders"]?.contains("more than 64 placeholders") == true, "\(refused)")
        #expect(refused["bad-escape"]?.contains("'~' must be followed by 0 or 1") == true, "\(refused)")
        #expect(refused.keys.allSatisfy { !$0.hasPrefix("seed-") }, "\(refused)")
    }
}
