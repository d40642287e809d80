import Foundation
import RunnerKit
import RunnerTestSupport
import Testing

@testable import runner

/// What ships with the binary: its version, completion scripts and man page, each judged by
/// the real tool (bash, zsh, fish, mandoc), and the built-in demo jobs.
@Suite(.startsProcesses, .timeLimit(.minutes(2)))
struct ShippingTests {
    @Test func versionNamesTheRunnerAndLibcurl() async throws {
        let w = try Workspace()
        let long = try await w.run(["--version"])
        let word = try await w.run(["version"])
        #expect(long.status == 0 && word.status == 0)
        #expect(long.stdout == word.stdout)
        let lines = long.stdout.split(separator: "\n")
        #expect(lines.first.map(String.init) == "runner \(RunnerVersion.current)")
        let curl = try #require(lines.dropFirst().first.map(String.init))
        #expect(curl.firstMatch(of: /^libcurl \d+\.\d+\.\d+, TLS \S+, HTTP\/2 (yes|no)$/) != nil, "\(curl)")
    }

    @Test func completionScriptsPassTheirShellsSyntaxCheck() async throws {
        let w = try Workspace()
        for (shell, flags) in [("bash", ["-n"]), ("zsh", ["-n"]), ("fish", ["--no-execute"])] {
            let script = try await w.run(["completions", shell])
            #expect(script.status == 0)
            for name in ["run", "validate", "completions", "resume", "per-host"] {
                #expect(script.stdout.contains(name), "\(shell) script lacks \(name)")
            }
            #expect(script.stdout.contains("image-list"), "\(shell): kind names complete where a value is a kind")
            let path = w.write("completion.\(shell)", script.stdout)
            let check = try await SystemTool.run(shell, flags + [path])
            #expect(check.status == 0, "\(shell) -n: \(check.output)")
        }
        let bad = try await w.run(["completions", "tcsh"])
        #expect(bad.status == 2)
        #expect(bad.stderr.hasPrefix("Error: Unknown shell 'tcsh'"))
    }

    @Test func bashCompletesSubcommandsOptionsAndValues() async throws {
        let w = try Workspace()
        let path = w.write("completion.bash", try await w.run(["completions", "bash"]).stdout)
        func complete(_ words: [String]) async throws -> [String] {
            let quoted = words.map { "'\($0)'" }.joined(separator: " ")
            let script = "source '\(path)'; COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count - 1); _runner; printf '%s\\n' \"${COMPREPLY[@]}\""
            return try await SystemTool.run("bash", ["-c", script]).output.split(separator: "\n").map(String.init)
        }
        #expect(try await complete(["runner", "r"]) == ["run"])
        #expect(try await complete(["runner", "--v"]) == ["--version"])
        #expect(try await complete(["runner", "run", "--res"]) == ["--resume"])
        #expect(Set(try await complete(["runner", "run", "--http", ""])) == ["curl", "urlsession"])
        #expect(Set(try await complete(["runner", "kinds", "im"])) == ["image", "image-list"])
        #expect(try await complete(["runner", "help", "comp"]) == ["completions"])
    }

    @Test func fishCompletesSubcommandsAndValues() async throws {
        let w = try Workspace()
        let path = w.write("runner.fish", try await w.run(["completions", "fish"]).stdout)
        func complete(_ line: String) async throws -> Set<String> {
            let output = try await SystemTool.run("fish", ["--no-config", "-c", "source '\(path)'; complete -C'\(line)'"]).output
            return Set(output.split(separator: "\n").map { String($0.split(separator: "\t")[0]) })
        }
        #expect(try await complete("runner r") == ["run"])
        #expect(try await complete("runner run --res") == ["--resume"])
        #expect(try await complete("runner run --http ") == ["curl", "urlsession"])
        #expect(try await complete("runner kinds ") == ["image", "entry", "tree", "image-list", "json", "file"])
    }

    /// Types a line and a tab into an interactive zsh (through zsh/zpty) whose fpath holds the
    /// script, then reads the line back as completion left it.
    @Test func zshCompletesSubcommandsOptionsAndValues() async throws {
        let w = try Workspace()
        try FileManager.default.createDirectory(atPath: "\(w.root)/zfunc", withIntermediateDirectories: true)
        w.write("zfunc/_runner", try await w.run(["completions", "zsh"]).stdout)
        let driver = w.write("complete.zsh", #"""
            zmodload zsh/zpty
            zpty z zsh -f -i
            zpty -w z "PS1='> '; fpath=($1 \$fpath); autoload -Uz compinit; compinit -u -D"
            zpty -w z 'show() { zle -I; print -r -- "LINE<$BUFFER>"; }; zle -N show; bindkey "^X" show; echo READY""NOW'
            zpty -r -m z out '*READYNOW*'
            zpty -w -n z "$2"$'\t'
            sleep 0.3
            zpty -w -n z $'\x18'
            zpty -r -m z out '*LINE<*>*'
            zpty -d z
            [[ $out =~ 'LINE<([^>]*)>' ]] && print -r -- "$match[1]"
            """#)
        func complete(_ line: String) async throws -> String {
            try await SystemTool.run("timeout", ["20", "zsh", "-f", driver, "\(w.root)/zfunc", line]).output
        }
        #expect(try await complete("runner r") == "runner run \n")
        #expect(try await complete("runner --vers") == "runner --version \n")
        #expect(try await complete("runner run --res") == "runner run --resume \n")
        #expect(try await complete("runner run --http c") == "runner run --http curl \n")
        #expect(try await complete("runner kinds image-") == "runner kinds image-list \n")
        #expect(try await complete("runner help comp") == "runner help completions \n")
    }

    @Test func theManPageHasNoWarningsAndListsEverySubcommand() async throws {
        let w = try Workspace()
        let page = try await w.run(["help", "--man"])
        #expect(page.status == 0)
        #expect(page.stdout.hasPrefix(".Dd "))
        let path = w.write("runner.1", page.stdout)
        let lint = try await SystemTool.run("mandoc", ["-T", "lint", "-W", "warning", path])
        #expect(lint.status == 0 && lint.output.isEmpty, "\(lint.output)")
        let text = try await SystemTool.run("mandoc", ["-T", "ascii", path]).output.replacingOccurrences(of: "\u{8}.", with: "")
        let help = try await w.run(["--help"])
        for line in help.stdout.split(separator: "\n") where line.hasPrefix("  ") && !line.hasPrefix("  -") && !line.hasPrefix("  See") {
            let name = String(line.split(separator: " ")[0])
            #expect(page.stdout.contains(".It Cm \(name)\n"), "the man page lacks \(name)")
        }
        #expect(text.contains("RUNNER(1)"))
    }

    /// Every variable the sources read from the environment (a lookup `environment["NAME"]`, a
    /// constant `environmentVariable = "NAME"`) is an entry of the man page's ENVIRONMENT.
    @Test func theManPagesEnvironmentListsEveryVariableTheRunnerReads() async throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Sources").standardized.path
        let files = (FileManager.default.enumerator(atPath: sources)?.allObjects as? [String] ?? []).filter { $0.hasSuffix(".swift") }
        #expect(files.count > 50, "the sources are found: \(sources)")
        var names = Set<String>()
        let quoted = /"([A-Za-z_][A-Za-z0-9_]*)"/
        for file in files {
            let text = (try? String(contentsOfFile: "\(sources)/\(file)", encoding: .utf8)) ?? ""
            for line in text.split(separator: "\n") where line.contains("environment[") || line.contains("nvironmentVariable = ") {
                guard !line.trimmingCharacters(in: .whitespaces).hasPrefix("//") else { continue }
                for match in line.matches(of: quoted) { names.insert(String(match.output.1)) }
            }
        }
        #expect(names.isSuperset(of: ["RUNNER_HTTP", "RUNNER_KINDS", "RUNNER_CONFIG", "RUNNER_QUEUE", "MALLOC_ARENA_MAX", "NOTIFY_SOCKET", "PATH"]), "\(names.sorted())")
        let page = try await Workspace().run(["help", "--man"]).stdout
        let start = try #require(page.range(of: ".Sh ENVIRONMENT"))
        let environment = String(page[start.upperBound...]).components(separatedBy: ".Sh FILES")[0]
        let entries = environment.split(separator: "\n").filter { $0.hasPrefix(".It Ev ") }.flatMap { line in
            line.dropFirst(7).split(separator: " ").filter { $0 != "," }.map(String.init)
        }
        for name in names.sorted() { #expect(entries.contains(name), "ENVIRONMENT lacks \(name): \(entries)") }
    }

    @Test func helpListsTheNewSubcommandsAndKindsTakesAKind() async throws {
        let w = try Workspace()
        let top = try await w.run(["help"])
        for name in ["help", "version", "completions"] { #expect(top.stdout.contains("  \(name) ")) }
        #expect(top.stdout.contains("  --version "))
        let image = try await w.run(["kinds", "image"])
        #expect(image.status == 0)
        #expect(image.stdout.hasPrefix("image (built-in): "))
        #expect(!image.stdout.contains("tree ("))
        let unknown = try await w.run(["kinds", "video"])
        #expect(unknown.status == 2)
        #expect(unknown.stderr.hasPrefix("Error: Unknown kind 'video'"))
    }

    /// The demo's jobs are built into the binary; they must stay the files of Jobs/demo.
    @Test func theBuiltInDemoJobsAreTheFilesOfJobsDemo() async throws {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Jobs/demo").standardized.path
        let names = try FileManager.default.contentsOfDirectory(atPath: folder).sorted()
        #expect(DemoJobs.files.map(\.name) == names)
        for (name, text) in DemoJobs.files {
            #expect(try String(contentsOfFile: "\(folder)/\(name)", encoding: .utf8) == text, "\(name) differs from Jobs/demo/\(name)")
        }
        let w = try Workspace()
        let demo = try await w.run(["demo"])
        #expect(demo.status == 0, "\(demo.stderr)")
        #expect(demo.stdout.contains("running the built-in copy of Jobs/demo: \(names.joined(separator: ", "))"), "\(demo.stdout)")
    }
}
