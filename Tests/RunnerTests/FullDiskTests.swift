import FixtureServer
import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// On a full disk, the jobs that do not fit fail saying so, leave nothing half-written, and
/// the run goes on.
@Suite(.startsProcesses, .timeLimit(.minutes(2)))
struct FullDiskTests {
    @Test(.enabled(if: SmallDisk.available, "needs root and permission to mount a tmpfs: skipped"))
    func jobsThatDoNotFitFailWithNoSpaceLeftAndTheRunGoesOn() async throws {
        let w = try Workspace()
        let disk = try SmallDisk(at: "\(w.root)/disk")
        defer { disk.unmount() }
        let out = "\(disk.path)/out"
        let png = FixtureCatalog.images.first { $0.format == "png" }!
        let gif = FixtureCatalog.images.first { $0.format == "gif" }!
        let big = "\(w.base)/bytes/3000000"  // 3 MB on a 2 MiB disk; a debug build writes it slowly

        // Given a first run that fits.
        w.write("first.json", """
            [{"kind": "image", "key": "image:a", "url": "\(w.base)/images/\(png.name)"},
             {"kind": "image", "key": "image:big", "url": "\(big)", "timeout": 30},
             {"kind": "entry", "id": "x", "key": "entry:big", "url": "\(big)", "timeout": 30},
             {"kind": "image", "key": "image:b", "url": "\(w.base)/images/\(gif.name)"}]
            """)
        let first = try await w.run(["run", "first.json", "--out", out, "--concurrency", "1"])
        #expect(first.status == 1, "\(first.stderr)")
        for key in ["image:big", "entry:big"] {
            let record = try Self.record(key, in: out)
            #expect(record["status"] == .string("failed"))
            let error = record["error"]?.stringValue ?? ""
            #expect(error.contains("no space left"), "\(key): \(error)")
        }
        #expect(try Self.record("image:a", in: out)["status"] == .string("succeeded"))
        #expect(try Self.record("image:b", in: out)["status"] == .string("succeeded"), "the run went on after the disk filled")

        // When a key with a good payload meets the full disk.
        w.write("second.json", """
            [{"kind": "image", "key": "image:a", "url": "\(big)", "timeout": 30},
             {"kind": "image", "key": "image:c", "url": "\(w.base)/images/\(png.name)"}]
            """)
        let second = try await w.run(["run", "second.json", "--out", out, "--concurrency", "1"])
        #expect(second.status == 1)
        let stale = try Self.record("image:a", in: out)
        #expect(stale["status"] == .string("failed"))
        #expect(stale["error"]?.stringValue?.contains("no space left") == true)
        #expect(stale["stale"] == .bool(true))
        #expect(try Self.record("image:c", in: out)["status"] == .string("succeeded"))

        // Then earlier payloads are intact and nothing partial remains.
        let files = Set(FileManager.default.enumerator(atPath: out)?.allObjects as? [String] ?? [])
        let payloads = files.filter { $0.hasPrefix("images/") || $0.hasPrefix("entries/") }
        #expect(payloads == ["images/a.png", "images/b.gif", "images/c.png"])
        #expect(FileManager.default.contents(atPath: "\(out)/images/a.png").map { [UInt8]($0) } == png.bytes)
        #expect(FileManager.default.contents(atPath: "\(out)/images/b.gif").map { [UInt8]($0) } == gif.bytes)
        #expect(!files.contains { $0.split(separator: "/").last?.hasPrefix(".tmp-") == true }, "\(files.sorted())")
    }

    static func record(_ key: String, in out: String) throws -> JSONValue {
        let path = "\(out)/results/\(OutputStore.fileName(forKey: key)).json"
        guard let data = FileManager.default.contents(atPath: path) else {
            throw Workspace.Missing(what: "no record for \(key) at \(path)")
        }
        return try JSONParser.parse([UInt8](data))
    }
}
