import Foundation
import Testing

@testable import runner

/// README's synopsis and the parser name the same options: each option is declared once, and the
/// usage lines, help, completions and man page come from that declaration; README is the one
/// place written by hand, so this test holds it to the declaration.
@Suite struct SynopsisTests {
    /// README's synopsis block (under "Using it"): options by subcommand, as `--name VALUE`.
    static func readmeSynopsis() throws -> [String: Set<String>] {
        let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../README.md").standardized.path
        let text = try String(contentsOfFile: readme, encoding: .utf8)
        let section = try #require(text.components(separatedBy: "\n## Using it\n").dropFirst().first)
        let block = try #require(section.components(separatedBy: "```").dropFirst().first)
        var options: [String: Set<String>] = [:]
        var command: String?
        for line in block.split(separator: "\n") {
            if line.hasPrefix("runner ") {
                let word = String(line.split(separator: " ")[1])
                command = word.hasPrefix("-") ? nil : word
                if let command { options[command, default: []] = [] }
            }
            guard let command else { continue }
            for match in line.matches(of: /--([a-z][a-z-]*)( [A-Z][A-Z\/|:%]*)?/) {
                options[command, default: []].insert("--\(match.1)" + (match.2.map(String.init) ?? ""))
            }
        }
        return options
    }

    @Test func readmeListsEveryOptionOfEverySubcommandAndNoOther() throws {
        let readme = try Self.readmeSynopsis()
        for command in Runner.visibleCommands {
            let declared = Set(command.options.map { "--\($0.name)" + ($0.value.map { " \($0)" } ?? "") })
            guard let listed = readme[command.name] else {
                Issue.record("README's synopsis has no line for \(command.name)")
                continue
            }
            #expect(listed.subtracting(declared).isEmpty, "README lists for \(command.name) what the parser does not know: \(listed.subtracting(declared).sorted())")
            #expect(declared.subtracting(listed).isEmpty, "README misses for \(command.name): \(declared.subtracting(listed).sorted())")
        }
        #expect(Set(readme.keys).subtracting(Runner.visibleCommands.map(\.name)).isEmpty, "README names a subcommand the parser does not know")
    }

    @Test func theUsageLineIsMadeFromTheOptions() throws {
        let run = try #require(Runner.command("run"))
        for option in run.options {
            #expect(run.usage.contains(option.usage), "\(option.name) is missing from '\(run.usage)'")
        }
        #expect(run.helpText.contains("--concurrency N") && run.helpText.contains("(default: 8)"))
    }
}
