import Foundation
import Testing

@testable import runner

/// The synopsis of docs/reference.md and the parser name the same options: each option is declared
/// once, and the usage lines, help, completions and man page come from that declaration; the
/// synopsis is the one place written by hand, so this test holds it to the declaration.
@Suite struct SynopsisTests {
    /// The synopsis block of docs/reference.md (under "Synopsis"): options by subcommand, as `--name VALUE`.
    static func pageSynopsis() throws -> [String: Set<String>] {
        let page = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../docs/reference.md").standardized.path
        let text = try String(contentsOfFile: page, encoding: .utf8)
        let section = try #require(text.components(separatedBy: "\n## Synopsis\n").dropFirst().first)
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

    @Test func theSynopsisListsEveryOptionOfEverySubcommandAndNoOther() throws {
        let synopsis = try Self.pageSynopsis()
        for command in Runner.visibleCommands {
            let declared = Set(command.options.map { "--\($0.name)" + ($0.value.map { " \($0)" } ?? "") })
            guard let listed = synopsis[command.name] else {
                Issue.record("docs/reference.md's synopsis has no line for \(command.name)")
                continue
            }
            #expect(listed.subtracting(declared).isEmpty, "docs/reference.md lists for \(command.name) what the parser does not know: \(listed.subtracting(declared).sorted())")
            #expect(declared.subtracting(listed).isEmpty, "docs/reference.md misses for \(command.name): \(declared.subtracting(listed).sorted())")
        }
        #expect(Set(synopsis.keys).subtracting(Runner.visibleCommands.map(\.name)).isEmpty, "docs/reference.md names a subcommand the parser does not know")
    }

    @Test func theUsageLineIsMadeFromTheOptions() throws {
        let run = try #require(Runner.command("run"))
        for option in run.options {
            #expect(run.usage.contains(option.usage), "\(option.name) is missing from '\(run.usage)'")
        }
        #expect(run.helpText.contains("--concurrency N") && run.helpText.contains("(default: 8)"))
    }
}
