import Foundation
import RunnerTestSupport
import RunnerKit
import Testing

/// Kinds read from files (`--kinds DIR`, `$RUNNER_KINDS`): found, refused when bad, listed,
/// and as good as the built-ins they mirror.
@Suite(.startsProcesses, .timeLimit(.minutes(2)))
struct FileKindTests {
    /// The repository's `Jobs/` folder.
    static let jobs: String = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Jobs").path

    static func demo(_ name: String, base: String) throws -> String {
        let text = try String(contentsOfFile: "\(jobs)/demo/\(name)", encoding: .utf8)
        return text.replacingOccurrences(of: "http://fixture.test", with: base)
    }

    /// Records by key, timings left out and the kind names of the mirrored kinds made equal.
    static func normalizedRecords(in out: String) throws -> [String: JSONValue] {
        var normalized: [String: JSONValue] = [:]
        for (key, record) in try RunAndWatchTests.records(in: out) {
            let text = JSONWriter.string(record)
                .replacingOccurrences(of: "json-image-list", with: "image-list")
                .replacingOccurrences(of: "json-entry", with: "entry")
            normalized[key.replacingOccurrences(of: "json-entry", with: "entry")] = try JSONParser.parse(text)
        }
        return normalized
    }

    @Test func declarativeKindsGiveTheRecordsOfTheBuiltInsTheyMirror() async throws {
        let w = try Workspace()
        let entries = try Self.demo("entries.jsonl", base: w.base)
        let images = try Self.demo("images.json", base: w.base)
        w.write("entries.jsonl", entries)
        w.write("images.json", images)
        w.write("mirror-entries.jsonl", entries.replacingOccurrences(of: #""kind": "entry""#, with: #""kind": "json-entry""#)
            .replacingOccurrences(of: #""key": "entry:"#, with: #""key": "json-entry:"#))
        w.write("mirror-images.json", images.replacingOccurrences(of: #""kind": "image-list""#, with: #""kind": "json-image-list""#))

        let builtIn = try await w.run(["run", "entries.jsonl", "images.json", "--out", "a"])
        let declared = try await w.run(["run", "mirror-entries.jsonl", "mirror-images.json", "--out", "b", "--kinds", "\(Self.jobs)/kinds"])
        #expect(builtIn.status == declared.status, "stderr: \(builtIn.stderr) / \(declared.stderr)")
        let a = try Self.normalizedRecords(in: "\(w.root)/a")
        let b = try Self.normalizedRecords(in: "\(w.root)/b")
        #expect(a.count >= 5, "the demo ran: \(a.keys.sorted())")
        #expect(Set(a.keys) == Set(b.keys))
        for (key, record) in a {
            guard case .object(let members) = record, let other = b[key], case .object(let otherMembers) = other else {
                Issue.record("\(key): no record in both runs")
                continue
            }
            #expect(members.map(\.key).sorted() == otherMembers.map(\.key).sorted(), "\(key): the same fields")
            for (name, value) in members {
                #expect(other[name] == value, "\(key).\(name): \(JSONWriter.string(value)) vs \(other[name].map { JSONWriter.string($0) } ?? "nothing")")
            }
        }
    }

    @Test func badKindFilesAreRefusedNamingTheFileAndTheField() async throws {
        let w = try Workspace()
        try FileManager.default.createDirectory(atPath: "\(w.root)/k", withIntermediateDirectories: true)
        w.write("job.json", #"{"kind": "entry", "id": "1", "url": "\#(w.base)/entries/{id}.json"}"#)
        let cases: [(file: String, text: String, says: String)] = [
            ("a.json", #"{"kind": "a", "payload": {"json": "tree"}}"#, "field 'payload.json'"),
            ("b.json", #"{"kind": "b", "parameters": {"n": {"type": "float"}}}"#, "field 'parameters.n.type'"),
            ("c.json", #"{"kind": "c", "key": "c:{nope}"}"#, "field 'key'"),
            ("d.json", #"{"kind": "other"}"#, "field 'kind'"),
            ("e.json", #"{"kind": "e", "details": {"x": "no-slash"}}"#, "field 'details.x'"),
            ("f.json", #"{"kind": "f", "colour": 1}"#, "field 'colour'"),
            ("entry.json", #"{"kind": "entry"}"#, "built-in"),
            // Children that could never be made: refused when kinds load, not element by element.
            ("g.json", #"{"kind": "g", "payload": {"json": "array"}, "children": {"each": "", "job": {"kind": "entyr", "url": "http://h/{/id}"}}}"#,
             "field 'children.job.kind' names the kind 'entyr', which is not a kind"),
            ("h.json", #"{"kind": "h", "payload": {"json": "array"}, "children": {"each": "", "job": {"kind": "entry", "ids": "{/id}", "url": "http://h/{/id}"}}}"#,
             "field 'children.job.ids' is neither a job field nor a parameter of the kind 'entry' (its parameters: id)"),
            ("i.json", #"{"kind": "i", "payload": {"json": "array"}, "children": {"each": "", "job": {"kind": "entry", "id": "{/id}", "url": "http://h/{ws}/{/id}"}}}"#,
             "field 'children.job.url' uses {ws}, which is not a parameter of the kind"),
        ]
        for (file, text, says) in cases {
            let path = w.write("k/\(file)", text)
            for command in [["validate", "job.json"], ["kinds"], ["run", "job.json"], ["submit", "job.json", "--spool", "s"]] {
                let result = try await w.run(command + ["--kinds", "k"])
                #expect(result.status == 2, "\(file) \(command[0]): \(result.stderr)")
                let lines = result.stderr.split(separator: "\n")
                #expect(lines.first?.contains("k/\(file)") == true && lines.first?.contains(says) == true, "\(file) \(command[0]): \(result.stderr)")
            }
            try FileManager.default.removeItem(atPath: path)
        }
        // Two folders defining one name: both named.
        try FileManager.default.createDirectory(atPath: "\(w.root)/k2", withIntermediateDirectories: true)
        w.write("k/same.json", #"{"kind": "same"}"#)
        w.write("k2/same.json", #"{"kind": "same"}"#)
        let clash = try await w.run(["kinds", "--kinds", "k", "--kinds", "k2"])
        #expect(clash.status == 2)
        #expect(clash.stderr.contains("k/same.json") && clash.stderr.contains("k2/same.json"), "\(clash.stderr)")
    }

    @Test func kindsAreFoundThroughTheOptionOrTheEnvironmentOnly() async throws {
        let w = try Workspace()
        let listed = try await w.run(["kinds", "--kinds", "\(Self.jobs)/kinds"])
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.stdout.contains("json-entry (\(Self.jobs)/kinds/json-entry.json)"), "\(listed.stdout)")
        #expect(listed.stdout.contains("id (string, required)"))
        #expect(listed.stdout.contains("entry (built-in)"))

        // Nothing from the current folder implicitly.
        w.write("json-entry.json", try String(contentsOfFile: "\(Self.jobs)/kinds/json-entry.json", encoding: .utf8))
        let plain = try await w.run(["kinds"])
        #expect(!plain.stdout.contains("json-entry"))

        let missing = "/nonexistent-kinds-folder-\(UUID().uuidString):\(Self.jobs)/kinds"
        let fromEnvironment = try await w.run(["kinds"], environment: ["RUNNER_KINDS": missing])
        #expect(fromEnvironment.status == 2, "a folder that does not exist is refused: \(fromEnvironment.stderr)")
        let good = try await w.run(["kinds"], environment: ["RUNNER_KINDS": "\(Self.jobs)/kinds"])
        #expect(good.stdout.contains("json-image-list"), "\(good.stdout) \(good.stderr)")
    }

    @Test func childrenTheTemplateCannotFillAreCountedInvalidWithoutFailingTheParent() async throws {
        let w = try Workspace()
        try FileManager.default.createDirectory(atPath: "\(w.root)/k", withIntermediateDirectories: true)
        // Workspace B of the fixture's tree: two entries with an id, and a folder without one.
        w.write("k/workspace.json", """
            {"kind": "workspace", "parameters": {"ws": {"type": "string", "required": true}, "n": {"type": "int", "default": 1}},
             "key": "workspace:{ws}", "payload": {"json": "array", "require": ["/0/children/1/children"]},
             "details": {"title": "/0/label", "entries": {"count": "/0/children/1/children"}, "nothing": "/9"},
             "children": {"each": "/0/children/1/children",
                          "job": {"kind": "entry", "id": "{/id}", "key": "entry:{ws}-{/id}", "url": "\(w.base)/entries/{{id}}.json"}}}
            """)
        w.write("job.json", #"{"kind": "workspace", "ws": "B/x y", "url": "\#(w.base)/data.json?ws={ws}"}"#)
        let result = try await w.run(["run", "job.json", "--kinds", "k"])
        #expect(result.status == 0, "\(result.stderr)")
        let record = try w.record("workspace:B/x y")
        #expect(record["status"] == .string("succeeded"))
        #expect(record["url"] == .string("\(w.base)/data.json?ws=B%2Fx%20y"), "the parameter is percent-encoded in the URL")
        let details = try #require(record["details"])
        #expect(details["title"] == .string("img.ly"))
        #expect(details["entries"] == .number(3))
        #expect(details["nothing"] == .null)
        // imgly.B.2 is one of the fixture's missing entries.
        #expect(details["children"]?["succeeded"] == .number(1), "\(JSONWriter.string(details))")
        #expect(details["children"]?["notFound"] == .number(1))
        #expect(details["children"]?["invalid"] == .number(1))
        #expect(details["invalidChild"]?.stringValue?.contains("/id") == true, "\(JSONWriter.string(details))")
        #expect(try w.status("entry:B/x y-imgly.B.1") == "succeeded")
    }

    @Test func aParentNoneOfWhoseChildrenCouldBeMadeFails() async throws {
        let w = try Workspace()
        try FileManager.default.createDirectory(atPath: "\(w.root)/k", withIntermediateDirectories: true)
        // The image list's elements have an `id` and an `imageUrl`, not a `name`.
        w.write("k/named.json", """
            {"kind": "named", "payload": {"json": "array"},
             "children": {"each": "", "job": {"kind": "entry", "id": "{/name}", "url": "\(w.base)/entries/{{id}}.json"}}}
            """)
        w.write("job.json", #"{"kind": "named", "key": "named", "url": "\#(w.base)/images.json"}"#)
        let result = try await w.run(["run", "job.json", "--kinds", "k"])
        #expect(result.status == 4, "\(result.stderr)")
        let record = try w.record("named")
        #expect(record["status"] == .string("failed"))
        let error = try #require(record["error"]?.stringValue)
        #expect(error.hasPrefix("none of its "), "\(error)")
        #expect(error.contains("children could be made into jobs; the first: child 1: element 1: {/name} names nothing"), "\(error)")
        #expect(record["details"]?["children"]?["invalid"] != nil)
    }

    @Test func payloadChecksFailWithAMessageSayingWhatArrived() async throws {
        let w = try Workspace()
        try FileManager.default.createDirectory(atPath: "\(w.root)/k", withIntermediateDirectories: true)
        w.write("k/obj.json", #"{"kind": "obj", "payload": {"json": "object"}}"#)
        w.write("k/pic.json", #"{"kind": "pic", "payload": {"image": ["jpeg"]}, "extension": "jpg"}"#)
        w.write("k/txt.json", #"{"kind": "txt", "payload": {"text": true, "contentType": ["text/plain"]}}"#)
        w.write("k/raw.json", #"{"kind": "raw", "payload": {"bytes": true}}"#)
        w.write("jobs.json", """
            [{"kind": "obj", "key": "obj:list", "url": "\(w.base)/data.json"},
             {"kind": "pic", "key": "pic:png", "url": "\(w.base)/images/png.png"},
             {"kind": "txt", "key": "txt:json", "url": "\(w.base)/data.json"},
             {"kind": "raw", "key": "raw:bytes", "url": "\(w.base)/bytes/1000"}]
            """)
        let result = try await w.run(["run", "jobs.json", "--kinds", "k"])
        #expect(result.status == 1)
        #expect(try w.record("obj:list")["error"]?.stringValue?.contains("expected a JSON object, but the JSON holds") == true)
        #expect(try w.record("pic:png")["error"]?.stringValue?.contains("PNG") == true)
        #expect(try w.record("txt:json")["error"]?.stringValue?.contains("Content-Type text/plain") == true)
        #expect(try w.status("raw:bytes") == "succeeded")
        #expect(try w.record("raw:bytes")["bytes"] == .number(1000))
    }

    /// An image payload is checked as the image kind checks it: a JPEG XL codestream whose end
    /// lies past the first 512 KiB is read back whole, not taken for cut short.
    @Test func anImagePayloadLargerThanItsFirstBytesIsJudgedWhole() async throws {
        let w = try Workspace()
        try FileManager.default.createDirectory(atPath: "\(w.root)/k", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: "\(w.root)/www", withIntermediateDirectories: true)
        w.write("k/pic.json", #"{"kind": "pic", "payload": {"image": ["jxl"]}, "extension": "jxl"}"#)
        // A bare codestream, its fields packed least significant bit first: 64x64 (small, 8 x
        // (7 + 1), ratio 1:1), metadata all default, default_m; from the next byte one frame, all
        // default, its TOC not permuted and of one section of 600 000 bytes (selector 2: 17 408
        // plus 22 bits).
        let size = 600_000
        let head: [UInt8] = [0xFF, 0x0A, 0x4F, 0x06, 0x01, 0x02, 0x8F, 0x23]
        let whole = head + [UInt8](repeating: 0, count: size)
        try Data(whole).write(to: URL(fileURLWithPath: "\(w.root)/www/big.jxl"))
        try Data(whole.dropLast()).write(to: URL(fileURLWithPath: "\(w.root)/www/cut.jxl"))
        // A port the kernel chose and nobody holds now (python's server binds it right after).
        let port = try LoopbackPort().port
        let server = try ChildProcess(
            "/usr/bin/env", ["python3", "-m", "http.server", "--bind", "127.0.0.1", String(port)], directory: "\(w.root)/www",
            stdout: .null, stderr: .null)
        defer { server.terminate() }
        let base = "http://127.0.0.1:\(port)"
        var up = false
        for _ in 0..<100 where !up {
            up = (try? String(contentsOf: URL(string: "\(base)/")!, encoding: .utf8)) != nil
            if !up { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(up, "python3's http.server did not answer")
        w.write("jobs.jsonl", """
            {"kind": "pic", "key": "big", "url": "\(base)/big.jxl"}
            {"kind": "pic", "key": "cut", "url": "\(base)/cut.jxl"}
            """)
        let result = try await w.run(["run", "jobs.jsonl", "--kinds", "k"])
        #expect(result.status == 1)
        let big = try w.record("big")
        #expect(big["status"]?.stringValue == "succeeded", "\(big)")
        #expect(big["bytes"]?.intValue == whole.count)
        #expect(try w.record("cut")["error"]?.stringValue == "the JPEG XL image is truncated: only \(whole.count - 1) bytes arrived")
    }
}

