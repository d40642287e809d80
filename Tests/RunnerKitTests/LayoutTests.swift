import Foundation
import Testing

/// RunnerKit's folders depend on each other as a tree, in the order the Layout section of
/// docs/contributing.md draws them: a file may use the types of its own folder and of the folders
/// listed below it, never of one above. A type used across that line fails the test, naming the
/// file and the type.
@Suite struct LayoutTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized.path

    /// The folders in the drawing of docs/contributing.md, top (uses the most) to bottom (uses nothing).
    static func drawnOrder() throws -> [String] {
        let page = try String(contentsOfFile: "\(root)/docs/contributing.md", encoding: .utf8)
        let layout = try #require(page.components(separatedBy: "\n## Layout\n").dropFirst().first)
        var folders: [String] = []
        for line in layout.split(separator: "\n").prefix(40) {
            guard let match = line.firstMatch(of: /^ {25}([A-Z][A-Za-z]+) +\S/) else { continue }
            folders.append(String(match.1))
        }
        return folders
    }

    @Test func everyFolderUsesOnlyThoseDrawnBelowIt() throws {
        let order = try Self.drawnOrder()
        let kit = "\(Self.root)/Sources/RunnerKit"
        let onDisk = try FileManager.default.contentsOfDirectory(atPath: kit).filter { !$0.hasPrefix(".") }.sorted()
        #expect(Set(order) == Set(onDisk), "docs/contributing.md draws \(order.sorted()), the disk has \(onDisk)")

        // Types declared at the top level of each folder (a private one is its file's alone).
        let declaration = /(?m)^(?:public |internal )?(?:final )?(?:struct|class|enum|protocol|actor) +([A-Z][A-Za-z0-9]*)/
        var sources: [String: [(file: String, text: String)]] = [:]
        var owner: [String: String] = [:]
        for folder in onDisk {
            for file in try FileManager.default.contentsOfDirectory(atPath: "\(kit)/\(folder)") where file.hasSuffix(".swift") {
                let text = try String(contentsOfFile: "\(kit)/\(folder)/\(file)", encoding: .utf8)
                sources[folder, default: []].append((file, text))
                for match in text.matches(of: declaration) { owner[String(match.1)] = folder }
            }
        }
        var crossings: [String] = []
        for (folder, files) in sources {
            guard let level = order.firstIndex(of: folder) else { continue }
            for (file, text) in files {
                let code = text.split(separator: "\n").map { $0.split(separator: "//", maxSplits: 1, omittingEmptySubsequences: false).first ?? "" }
                    .joined(separator: "\n")
                let words = Set(code.matches(of: /\b[A-Z][A-Za-z0-9]*/).map { String($0.0) })
                for word in words {
                    guard let home = owner[word], home != folder, let above = order.firstIndex(of: home), above < level else { continue }
                    crossings.append("\(folder)/\(file) uses \(word) of \(home), drawn above it")
                }
            }
        }
        #expect(crossings.isEmpty, "\(crossings.sorted().joined(separator: "\n"))")
    }
}
