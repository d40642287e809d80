import Foundation
import Glibc
import RunnerKit
import Testing

/// What a mirror needs of the output directory: payloads placed by their URL's path
/// (`{urlPath}`, `childOutput`), and the keys a run or batch no longer lists, to forget.
@Suite struct MirrorTests {
    static func path(_ url: String) throws -> String { try OutputStore.urlPath(of: #require(URL(string: url))) }

    @Test func aURLsPathIsNormalizedAndConfinedAsWgetKeepsIt() throws {
        #expect(try Self.path("https://example.org/pub/data/file.tar.gz") == "pub/data/file.tar.gz")
        #expect(try Self.path("https://example.org/pub/./a//b") == "pub/a/b", "empty and . parts go")
        #expect(try Self.path("https://example.org/a/../b") == "b", ".. takes the part before it away")
        #expect(try Self.path("https://example.org/../../etc/passwd") == "etc/passwd", "never above the root")
        #expect(try Self.path("https://example.org/a/%2e%2e/%2E%2E/b") == "b", "an encoded .. is a .. too")
        #expect(try Self.path("https://example.org/caf%C3%A9/na%20me.txt") == "café/na me.txt", "parts are decoded")
        #expect(try Self.path("https://example.org/a%2Fb/c") == "a%2Fb/c", "an encoded slash stays encoded")
        #expect(try Self.path("https://example.org/x%0Ay") == "x%0Ay", "a control character stays encoded")
        #expect(try Self.path("https://example.org/.well-known/.env") == "%2Ewell-known/%2Eenv", "no hidden name")
        #expect(try Self.path("https://example.org/docs/") == "docs/index.html")
        #expect(try Self.path("https://example.org") == "index.html")
        #expect(try Self.path("https://example.org/list.json?page=2#top") == "list.json", "no query, no fragment")
        #expect(throws: JobSpecError.self) { try Self.path("https://example.org/" + String(repeating: "n", count: 256)) }
    }

    @Test func aResolvedOutputKeepsEveryOutputRule() throws {
        let url = try #require(URL(string: "https://example.org/runs/x.json"))
        #expect(try OutputStore.resolveOutput("mirror/{urlPath}", url: url) == "mirror/runs/x.json")
        #expect(try OutputStore.resolveOutput("plain/name.bin", url: url) == "plain/name.bin", "no placeholder: a plain output")
        #expect {
            try OutputStore.resolveOutput("{urlPath}", url: url)
        } throws: { error in
            (error as? JobSpecError)?.description
                == "field 'output' is 'runs/x.json' for this URL, which must not point into results/, runs/ or a hidden name; put the mirror under a folder of its own, as \"mirror/{urlPath}\""
        }
    }

    @Test func childOutputGivesEachChildItsOwnURLsPathAndNeedsThePlaceholder() throws {
        let registry = probeRegistry()
        let parent = try JobDescriptor.decode(
            [("kind", .string("probe")), ("url", .string("https://example.org/lists/all.json")), ("output", .string("m/{urlPath}")),
             ("childOutput", .string("m/{urlPath}"))], registry: registry)
        #expect(parent.output == "m/lists/all.json")
        let child = try JobDescriptor.decode(
            [("kind", .string("probe")), ("url", .string("https://cdn.example.org/img/1.png"))], registry: registry, parent: parent)
        #expect(child.output == "m/img/1.png" && child.childOutput == "m/{urlPath}", "inherited, for its own children too")
        let own = try JobDescriptor.decode(
            [("kind", .string("probe")), ("url", .string("https://cdn.example.org/img/2.png")), ("output", .string("x.png"))],
            registry: registry, parent: parent)
        #expect(own.output == "x.png", "a child's own output wins")
        #expect(throws: JobSpecError(field: "childOutput", "must hold {urlPath}, else every child would write the same file")) {
            try JobDescriptor.decode(
                [("kind", .string("probe")), ("url", .string("https://example.org/a")), ("childOutput", .string("same.bin"))], registry: registry)
        }
        #expect(throws: JobSpecError(field: "childOutput", "must not point into results/, runs/ or a hidden name")) {
            try JobDescriptor.decode(
                [("kind", .string("probe")), ("url", .string("https://example.org/a")), ("childOutput", .string("results/{urlPath}"))], registry: registry)
        }
    }

    /// An output with three keys recorded, one of them also with a kept partial, and a fourth
    /// key whose only trace is a kept partial.
    static func output(_ folder: TemporaryFolder) throws -> OutputStore {
        let store = try OutputStore(root: folder.path + "/out")
        for key in ["file:a", "file:b", "file:c"] {
            let name = key.dropFirst(5)
            try store.write(Array("payload \(name)".utf8), to: "files/\(name).bin")
            try store.writeRecord(.object([("key", .string(key)), ("status", .string("succeeded")), ("output", .string("files/\(name).bin"))]), key: key)
        }
        for key in ["file:b", "file:d"] {
            let name = PartialDownload.name(forKey: key)
            folder.write("out/files/\(name)", "kept bytes")
            folder.write("out/files/\(name).json", #"{"key": "\#(key)", "url": "https://example.org/\#(key)"}"#)
        }
        return store
    }

    @Test func theKeysNotInARunAreThoseOfRecordsAndKeptPartialsItDidNotList() throws {
        let folder = TemporaryFolder()
        let store = try Self.output(folder)
        #expect(store.keys(notIn: ["file:a", "file:c"]) == ["file:b", "file:d"])
        let dry = try #require(store.forget(key: "file:b", dryRun: true))
        #expect(dry.removed.sorted() == ["files/" + PartialDownload.name(forKey: "file:b"), "files/" + PartialDownload.name(forKey: "file:b") + ".json",
            "files/b.bin", "results/" + OutputStore.fileName(forKey: "file:b") + ".json"].sorted())
        #expect(store.keys(notIn: ["file:a", "file:c"]) == ["file:b", "file:d"], "a dry run removes nothing")
        #expect(store.forget(key: "file:d")?.removed.count == 2, "a key with kept bytes and no record is forgotten too")
        #expect(store.forget(key: "file:b", sparing: ["files/b.bin"])?.removed.contains("files/b.bin") == false, "a payload another key points to stays")
        #expect(FileManager.default.fileExists(atPath: folder.path + "/out/files/b.bin"))
        #expect(store.keys(notIn: ["file:a", "file:c"]).isEmpty)
        #expect(store.forget(key: "file:zz") == nil)
    }

    @Test func theKeysARunIncludedAreEveryKeyWithALineChildrenAndSettledOnesToo() throws {
        let folder = TemporaryFolder()
        let log = folder.write("run.jsonl", """
            {"key": "list:a", "status": "succeeded"}
            {"key": "image:1", "status": "failed", "parent": "list:a"}
            {"key": "image:2", "settledIn": "out/runs/earlier.jsonl"}
            {"key": "entry:gone", "status": "notFound"}
            not a record
            {"key": "cut
            """)
        #expect(try RunLog.includedKeys(atPath: log) == ["list:a", "image:1", "image:2", "entry:gone"])
        let empty = folder.write("empty.jsonl", "")
        #expect(throws: RunLog.ResumeError.self) { try RunLog.includedKeys(atPath: empty) }
        let junk = folder.write("junk.jsonl", "{\"no\": \"key\"}\n[1, 2]\n")
        #expect(throws: RunLog.ResumeError.self) { try RunLog.includedKeys(atPath: junk) }
        #expect(throws: RunLog.ResumeError.self) { try RunLog.includedKeys(atPath: folder.path + "/missing.jsonl") }
        #expect(throws: RunLog.ResumeError.self) { try RunLog.includedKeys(atPath: folder.path) }
    }
}
