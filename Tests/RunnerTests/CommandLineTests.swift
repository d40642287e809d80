import FixtureServer
import Foundation
import RunnerKit
import RunnerTestSupport
import Testing

/// Bad input, help and the small subcommands, through the built binary.
@Suite(.startsProcesses, .timeLimit(.minutes(1)))
struct CommandLineTests {
    @Test func aBatchWithOneBadJobRunsNothingAndExits2() async throws {
        let w = try Workspace()
        w.write("batch.json", """
            {"jobs": [
              {"kind": "image", "url": "\(w.base)/images/png.png"},
              {"kind": "image", "url": "\(w.base)/images/png.png", "timeout": 0}
            ]}
            """)
        let result = try await w.run(["run", "batch.json"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("batch.json: job 2: field 'timeout' must be a number of seconds greater than 0"), "\(result.stderr)")
        #expect(w.server.totalRequests == 0)
        #expect(!FileManager.default.fileExists(atPath: w.out), "nothing is written")
    }

    @Test(arguments: [
        (#"{"kind": "video", "url": "http://h/x"}"#, "field 'kind' names an unknown kind 'video'"),
        (#"{"kind": "image", "url": "file:///etc/passwd"}"#, "field 'url' uses the scheme 'file'"),
        (#"{"kind": "image", "url": "http://h/x", "output": "../x.png"}"#, "field 'output' must not climb out"),
        (#"{"kind": "entry", "url": "http://h/{id}"}"#, "field 'id' is missing"),
        (#"{"kind": "image", "url": "http://h/x", "idField": "n"}"#, "field 'idField' is not a field of kind 'image'"),
        ("{\"kind\": \"image\",", "is not valid JSON"),
    ])
    func badInputIsOneClearLine(text: String, expected: String) async throws {
        let w = try Workspace()
        w.write("job.json", text)
        for command in ["run", "validate"] {
            let result = try await w.run([command, "job.json"])
            #expect(result.status == 2)
            let first = result.stderr.split(separator: "\n").first.map(String.init) ?? ""
            #expect(first.hasPrefix("Error: job.json: "), "\(first)")
            #expect(first.contains(expected), "\(first)")
        }
    }

    /// A watcher of a queue takes no spool folder: its options are refused, not ignored (and
    /// nothing is connected to or written).
    @Test(arguments: [
        (["--settle", "3"], "--settle is an option of the spool's watcher"),
        (["--group", "staff"], "--group is an option of the spool's watcher"),
        (["--spool", "elsewhere"], "--spool is an option of the spool's watcher"),
    ])
    func optionsOfTheSpoolsWatcherAreRefusedWithQueue(extra: [String], expected: String) async throws {
        let w = try Workspace()
        let result = try await w.run(["watch", "--queue", "postgresql:///nowhere?host=\(w.root)", "--out", w.out] + extra)
        #expect(result.status == 2, "\(result.stderr)")
        #expect(result.stderr.contains(expected), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: w.out), "nothing is written")
        let keep = try await w.run(["watch", "--spool", "\(w.root)/spool", "--keep", "3"])
        #expect(keep.status == 2 && keep.stderr.contains("--keep needs --queue"), "\(keep.stderr)")
    }

    @Test func validateCountsJobsOfAValidFile() async throws {
        let w = try Workspace()
        w.write("ok.jsonl", "{\"kind\": \"image\", \"url\": \"http://h/a.png\"}\n{\"kind\": \"entry\", \"id\": 7, \"url\": \"http://h/{id}\"}\n")
        let result = try await w.run(["validate", "ok.jsonl"])
        #expect(result.status == 0)
        #expect(result.stdout == "ok.jsonl: 2 jobs, valid\n")
        #expect(w.server.totalRequests == 0)
    }

    @Test func kindsListsTheBuiltInKindsWithTheirParameters() async throws {
        let w = try Workspace()
        let result = try await w.run(["kinds"])
        #expect(result.status == 0)
        for line in ["image (built-in):", "entry (built-in):", "tree (built-in):", "image-list (built-in):", "entries (URL template)", "idField (string)", "id (string or int, required)"] {
            #expect(result.stdout.contains(line), "missing \(line)")
        }
    }

    @Test func helpIsTheSameThreeWays() async throws {
        let w = try Workspace()
        let a = try await w.run(["run", "--help"])
        let b = try await w.run(["run", "-h"])
        let c = try await w.run(["help", "run"])
        #expect(a.status == 0)
        #expect(a.stdout == b.stdout && b.stdout == c.stdout)
        #expect(a.stdout.hasPrefix("OVERVIEW: "))
        #expect(a.stdout.contains("USAGE: runner run FILE…"))
        #expect(a.stdout.contains("--concurrency N"))
        let top = try await w.run(["--help"])
        for name in ["run", "validate", "kinds", "demo"] { #expect(top.stdout.contains("  \(name) ")) }
    }

    @Test func usageErrorsExit2WithTheUsageLine() async throws {
        let w = try Workspace()
        let unknown = try await w.run(["run", "x.json", "--bogus"])
        #expect(unknown.status == 2)
        #expect(unknown.stderr.hasPrefix("Error: Unknown option '--bogus'\nUsage: runner run "))
        let missing = try await w.run(["run"])
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("Missing expected argument 'FILE…'"))
        let badNumber = try await w.run(["run", "x.json", "--concurrency", "zero"])
        #expect(badNumber.status == 2)
        let noCommand = try await w.run(["frobnicate"])
        #expect(noCommand.status == 2)
        #expect(noCommand.stderr.contains("Unknown subcommand 'frobnicate'"))
    }
}
