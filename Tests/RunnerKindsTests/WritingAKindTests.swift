import FixtureServer
import Foundation
import RunnerKinds
import RunnerKit
import RunnerTesting
import Testing

// The kind from "Writing a job kind" in docs/library.md, verbatim: if this stops compiling or
// working, the page is wrong.
public struct TextKind: JobKind {
    public static let name = "text"
    public static let summary = "Fetches a UTF-8 text file."
    public static let parameters = [KindParameter("minLength", type: .int, "Fewest characters accepted.")]
    public static let accept: String? = "text/plain"

    let minLength: Int

    public init(fields: inout JobFields) throws(JobSpecError) {
        minLength = try fields.int("minLength") ?? 0   // a mistyped value is reported by field name
    }

    public func run(in context: JobContext) async throws -> KindOutcome {
        let fetch = try await context.fetch(folder: "texts")  // 404 → notFound, 5xx → failed (transient)
        guard case .fetched(let response) = fetch else {        // 304: the earlier payload stands
            return .fetched(fetch, folder: "texts", fileExtension: "txt")
        }
        let bytes = try response.payload.bytes()
        guard let text = String(validating: bytes, as: UTF8.self), text.count >= minLength else {
            throw JobFailure.failed("expected UTF-8 text of at least \(minLength) characters")
        }
        // The engine stores the body and fills output, bytes, sha256 and httpStatus.
        return .fetched(fetch, folder: "texts", fileExtension: "txt", details: [("characters", JSONValue(text.count))])
    }
}

// The first example of docs/library.md, verbatim but indented: compiled, never run (it fetches
// from the internet).
func firstExampleOfTheLibraryPage() async throws {
    var configuration = JobEngine.Configuration.run(registry: BuiltInKinds.registry())
    configuration.out = "out"                   // made if needed; or hand in `store:`
    configuration.concurrency = 32
    configuration.jobDefaults.retries = 2       // for every job that sets none
    let engine = try JobEngine(configuration: configuration)
    let job = JobDescriptor(ImageKind(), key: "image:cat", url: URL(string: "https://cataas.com/cat")!)
    let result = await engine.run(job)          // a JobResult; the record is in out/results/
    print(result.status)                        // succeeded, or why not: result.reason, result.error
    engine.cancel(key: "image:cat", reason: "no longer needed")  // from anywhere: ends it `cancelled`
    await engine.shutdown()                     // cancels what runs, writes every record, stops its threads
}

// The test of a kind with RunnerTesting's doubles, from docs/library.md, verbatim.
@Test func aShortTextFails() async throws {
    let http = RecordingHTTP()
    http.script("https://example.test/a.txt", .ok("hi"))
    var registry = KindRegistry()
    try registry.register(TextKind.self)
    let out = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString).path
    let engine = try JobEngine(configuration: .init(registry: registry, store: try OutputStore(root: out), http: http).with {
        $0.clock = TestClock()    // deadlines and backoff run on it: no test sleeps through 2 s
    })
    var fields = JobFields([("minLength", .number(10))])
    let kind = try TextKind(fields: &fields)
    let result = await engine.run(JobDescriptor(kind, url: URL(string: "https://example.test/a.txt")!))
    #expect(result.status == .failed && result.reason == .invalidPayload)
    #expect(http.requests.count == 1)
}

@Suite struct WritingAKindTests {
    var page: String {
        get throws {
            let tests = URL(fileURLWithPath: #filePath)
            return try String(contentsOf: tests.deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("docs/library.md"), encoding: .utf8)
        }
    }

    /// The lines of `text` from the one starting with `first` through the one starting with `last`.
    func lines(of text: String, from first: String, through last: String, dedent: Int = 0) -> [String]? {
        let all = text.split(separator: "\n", omittingEmptySubsequences: false).map { String($0.dropFirst(min(dedent, $0.prefix { $0 == " " }.count))) }
        guard let start = all.firstIndex(where: { $0.hasPrefix(first) }),
            let end = all[start...].firstIndex(where: { $0.hasPrefix(last) })
        else { return nil }
        return Array(all[start...end])
    }

    /// The page's first example compiles: it is `firstExampleOfTheLibraryPage`'s body.
    @Test func theLibraryPagesFirstExampleIsCompiledHere() throws {
        let source = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
        let first = "var configuration = JobEngine.Configuration.run", last = "await engine.shutdown()"
        let shown = try #require(lines(of: try page, from: first, through: last))
        #expect(shown == lines(of: source, from: first, through: last, dedent: 4))
        #expect(try page.contains("```swift\nimport Foundation\nimport RunnerKit\nimport RunnerKinds\n\n" + first))
    }

    /// The page's test of a kind is `aShortTextFails`, character for character.
    @Test func theLibraryPagesTestExampleIsRunHere() throws {
        let source = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
        let first = "@Test func aShortTextFails()", last = "}"
        let shown = try #require(lines(of: try page, from: first, through: last))
        #expect(shown == lines(of: source, from: first, through: last))
    }

    /// The example of docs/library.md is this file's `TextKind`, character for character.
    @Test func theLibraryPageShowsThisKindVerbatim() throws {
        let tests = URL(fileURLWithPath: #filePath)
        let page = try String(contentsOf: tests.deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/library.md"), encoding: .utf8)
        let source = try String(contentsOf: tests, encoding: .utf8)
        func kind(in text: String) -> Substring? {
            guard let start = text.range(of: "public struct TextKind: JobKind {"),
                let end = text.range(of: "\n}\n", range: start.upperBound..<text.endIndex)
            else { return nil }
            return text[start.lowerBound..<end.upperBound]
        }
        let shown = try #require(kind(in: page), "docs/library.md has the example")
        #expect(shown == kind(in: source))
    }

    /// A kind registered in code says which file registered it: `runner kinds` lists that, and
    /// a name registered twice names both places.
    @Test func aKindRegisteredInCodeNamesTheFileThatRegisteredIt() throws {
        var registry = BuiltInKinds.registry()
        try registry.register(TextKind.self)
        #expect(registry.definition(named: "text")?.source == "RunnerKindsTests/WritingAKindTests.swift")
        #expect(registry.definition(named: "entry")?.source == "built-in")
        #expect(KindDefinition(TextKind.self).source == "RunnerKindsTests/WritingAKindTests.swift")
        #expect {
            try registry.register(TextKind.self, source: "MyApp/Kinds.swift")
        } throws: { error in
            (error as? KindRegistry.DuplicateKind)?.description
                == "A job kind named 'text' is already defined (RunnerKindsTests/WritingAKindTests.swift); MyApp/Kinds.swift defines it again."
        }
    }

    @Test func aNewKindIsOneTypeAndOneRegistration() async throws {
        var registry = BuiltInKinds.registry()
        try registry.register(TextKind.self)
        #expect(throws: KindRegistry.DuplicateKind.self) { try registry.register(TextKind.self) }

        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("runner-kind-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let server = FixtureServer()
        try server.start()
        defer { server.stop() }
        let file = "\(folder)/jobs.json"
        try #"[{"kind": "text", "key": "text:tree", "url": "\#(server.baseURL)/data.json", "minLength": 10},"#
            .appending(#" {"kind": "text", "url": "http://h/x", "minLength": "ten"}]"#)
            .write(toFile: file, atomically: true, encoding: .utf8)
        let report = JobFileReader.validate(path: file, registry: registry)
        #expect(report.errors.map(\.description) == ["\(file): job 2: field 'minLength' must be a whole number, not a string"])

        let job = try JobDescriptor.decode(
            [("kind", .string("text")), ("key", .string("text:tree")), ("url", .string("\(server.baseURL)/data.json"))],
            registry: registry)
        let engine = try JobEngine(configuration: .init(registry: registry, store: try OutputStore(root: "\(folder)/out"), http: URLSessionFetcher()))
        let result = await engine.run(job)
        #expect(result.status == .succeeded, "\(result.error ?? "")")
        #expect(result.output == "texts/tree.txt")
        #expect(result.details.first?.value == JSONValue(FixtureCatalog.treeJSON.count))
    }
}
