import FixtureServer
import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// Whatever the key or `output`, and whatever links sit inside out/, nothing is written outside it.
@Suite(.startsProcesses, .timeLimit(.minutes(2)))
struct ConfinementTests {
    static let hostileKeys = [
        "a/b/c", "../../escape", "..", ".", "/etc/passwd", "ünï/日本語/🐈", String(repeating: "k", count: 300),
        "$(touch pwned); rm -rf ~ `id` | cat & x > y < z * ? [a] {b} 'q' \"d\" \\ #",
        "image:../../../escape", "line\nbreak\ttab",  // (an empty key is refused when the file is read)
    ]

    @Test func hostileKeysStayInsideTheOutputDirectory() async throws {
        let w = try Workspace()
        let png = FixtureCatalog.images[0]
        let jobs = Self.hostileKeys.map { key in
            #"{"kind": "image", "key": \#(quoted(key)), "url": "\#(w.base)/images/\#(png.name)"}"#
        }
        w.write("keys.json", "[" + jobs.joined(separator: ",\n") + "]")
        let before = Self.everything(under: w.root).subtracting(Self.everything(under: w.out))
        let result = try await w.run(["run", "keys.json", "--out", "deep/er/out"])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let out = "\(w.root)/deep/er/out"
        // Nothing new outside out/: a key that climbed would land in deep/er/ or above.
        let after = Self.everything(under: w.root).filter { !$0.hasPrefix("deep/er/out") }
        #expect(after.subtracting(before).subtracting(["deep", "deep/er"]) == [], "written outside out/")
        let files = Self.everything(under: out).filter { !$0.hasSuffix("/") }
        for key in Self.hostileKeys {
            let record = "results/\(OutputStore.fileName(forKey: key)).json"
            #expect(FileManager.default.fileExists(atPath: "\(out)/\(record)"), "record of \(key.debugDescription)")
        }
        let payloads = files.filter { $0.hasPrefix("images/") }
        #expect(payloads.count == Self.hostileKeys.count, "one payload per key, none shared: \(payloads)")
        #expect(payloads.allSatisfy { !$0.dropFirst("images/".count).contains("/") }, "flat names: \(payloads)")
        #expect(payloads.allSatisfy { $0.utf8.count < 200 })
        #expect(!files.contains { $0.split(separator: "/").last?.hasPrefix(".tmp-") == true })
    }

    @Test func unusualButValidOutputsStayInside() async throws {
        let w = try Workspace()
        let outputs = ["./x/./y.png", "deep/ü 日本/$(id)/a b;c.png", "x//z.png", String(repeating: "d/", count: 40) + "f.png"]
        let jobs = outputs.enumerated().map { index, output in
            #"{"kind": "image", "key": "k\#(index)", "url": "\#(w.base)/images/png.png", "output": \#(quoted(output))}"#
        }
        w.write("outputs.json", "[" + jobs.joined(separator: ",\n") + "]")
        let result = try await w.run(["run", "outputs.json"])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        for (index, output) in outputs.enumerated() {
            let record = try w.record("k\(index)")
            let written = try #require(record["output"]?.stringValue)
            let expected = try OutputStore.validateOutput(output)
            #expect(written == expected)
            #expect(w.payload(written) == FixtureCatalog.images[0].bytes)
        }
        #expect(Set(Self.everything(under: w.root).map { $0.split(separator: "/")[0] }) == ["out", "outputs.json"])
    }

    @Test(arguments: ["../x.png", "/tmp/x.png", "a/../../x.png", "results/x.json", ".hidden/x.png", "~/x.png"])
    func climbingOutputsAreRefusedBeforeAnythingRuns(output: String) async throws {
        let w = try Workspace()
        w.write("bad.json", #"{"kind": "image", "key": "k", "url": "\#(w.base)/images/png.png", "output": \#(quoted(output))}"#)
        let result = try await w.run(["run", "bad.json"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("field 'output'"), "\(result.stderr)")
        #expect(w.server.requestCount(path: "/images/png.png") == 0)
    }

    @Test func aSymlinkAtThePayloadPathIsReplacedNotWrittenThrough() async throws {
        let w = try Workspace()
        let victim = w.write("victim.txt", "keep me\n")
        try FileManager.default.createDirectory(atPath: "\(w.out)/images", withIntermediateDirectories: true)
        #expect(symlink(victim, "\(w.out)/images/cat.png") == 0)
        #expect(symlink(victim, "\(w.out)/custom.png") == 0)
        w.write("cat.json", """
            [{"kind": "image", "key": "image:cat", "url": "\(w.base)/images/png.png"},
             {"kind": "image", "key": "custom", "url": "\(w.base)/images/png.png", "output": "custom.png"}]
            """)
        let result = try await w.run(["run", "cat.json"])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        for path in ["images/cat.png", "custom.png"] {
            var info = stat()
            #expect(lstat("\(w.out)/\(path)", &info) == 0)
            #expect(info.st_mode & S_IFMT == S_IFREG, "\(path) is a regular file now")
            #expect(w.payload(path) == FixtureCatalog.images[0].bytes)
        }
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "keep me\n")
    }

    /// A link where a folder of out/ should be is refused with a clear error; nothing reaches its target.
    @Test func aSymlinkedFolderInsideOutIsRefused() async throws {
        let w = try Workspace()
        let elsewhere = "\(w.root)/elsewhere"
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: w.out, withIntermediateDirectories: true)
        #expect(symlink(elsewhere, "\(w.out)/images") == 0)
        #expect(symlink(elsewhere, "\(w.out)/custom") == 0)
        w.write("jobs.json", """
            [{"kind": "image", "key": "image:cat", "url": "\(w.base)/images/png.png"},
             {"kind": "image", "key": "custom", "url": "\(w.base)/images/png.png", "output": "custom/deeper/cat.png"},
             {"kind": "entry", "id": "imgly.A.1", "url": "\(w.base)/entries/{id}.json"}]
            """)
        let result = try await w.run(["run", "jobs.json"])
        #expect(result.status == 1)
        for key in ["image:cat", "custom"] {
            let record = try w.record(key)
            #expect(record["status"] == .string("failed"))
            let error = record["error"]?.stringValue ?? ""
            #expect(error.contains("is a symbolic link"), "\(error)")
        }
        #expect(try w.status("entry:imgly.A.1") == "succeeded", "the other jobs run")
        #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere) == [])
    }

    @Test(arguments: ["results", "runs", ".lock"])
    func aSymlinkedBookkeepingPathStopsTheRunWithAClearError(name: String) async throws {
        let w = try Workspace()
        let elsewhere = "\(w.root)/elsewhere"
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: w.out, withIntermediateDirectories: true)
        let target = name == ".lock" ? w.write("victim.txt", "keep me\n") : elsewhere
        #expect(symlink(target, "\(w.out)/\(name)") == 0)
        w.write("cat.json", #"{"kind": "image", "key": "image:cat", "url": "\#(w.base)/images/png.png"}"#)
        let result = try await w.run(["run", "cat.json"])
        #expect(result.status != 0)
        #expect(result.stderr.contains("symbolic link"), "\(result.stderr)")
        #expect(result.stderr.split(separator: "\n").count <= 3, "\(result.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere) == [])
        if name == ".lock" {
            #expect(try String(contentsOfFile: target, encoding: .utf8) == "keep me\n")
        }
    }

    /// Every path under `folder`, relative, folders with no trailing slash.
    static func everything(under folder: String) -> Set<String> {
        Set(FileManager.default.enumerator(atPath: folder)?.allObjects as? [String] ?? [])
    }
}

/// A string as a JSON string literal.
func quoted(_ text: String) -> String {
    String(decoding: JSONWriter.data(.string(text)), as: UTF8.self)
}
