import Foundation
import RunnerKinds
import RunnerKit
import Testing

/// Kind files loaded by a program, as `runner --kinds DIR` loads them: a registry, or the first
/// bad file thrown, naming the file and the field.
@Suite struct KindFoldersTests {
    /// A fresh folder holding `files` (name → text), removed by the caller.
    static func folder(_ files: [String: String]) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("kinds-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        for (name, text) in files {
            try Data(text.utf8).write(to: URL(fileURLWithPath: "\(path)/\(name)"))
        }
        return path
    }

    @Test func theKindsOfAFolderJoinTheBuiltInOnes() throws {
        let folder = try Self.folder(["gallery.json": #"{"kind": "gallery", "summary": "A gallery."}"#, "notes.txt": "not a kind"])
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let registry = try KindFolders.registry(folders: [folder])
        #expect(registry.names == BuiltInKinds.registry().names + ["gallery"])
        #expect(registry.definition(named: "gallery")?.source == "\(folder)/gallery.json")
        #expect(registry.definition(named: "entry")?.source == "built-in")
    }

    @Test func aBadKindFileIsThrownNamingTheFileAndTheField() throws {
        let folder = try Self.folder(["a.json": #"{"kind": "a", "payload": {"json": "tree"}}"#])
        defer { try? FileManager.default.removeItem(atPath: folder) }
        #expect {
            _ = try KindFolders.registry(folders: [folder])
        } throws: { error in
            let error = error as? JobFileError
            return error?.file == "\(folder)/a.json" && error?.problem.field == "payload.json"
        }
    }

    @Test func aNameDefinedTwiceIsThrownNamingBothFiles() throws {
        let first = try Self.folder(["same.json": #"{"kind": "same"}"#])
        let second = try Self.folder(["same.json": #"{"kind": "same"}"#, "entry.json": #"{"kind": "entry"}"#])
        defer {
            try? FileManager.default.removeItem(atPath: first)
            try? FileManager.default.removeItem(atPath: second)
        }
        do {
            _ = try KindFolders.registry(folders: [first, second])
            Issue.record("a name defined twice must be refused")
        } catch {
            // entry.json comes first in the second folder: it clashes with the built-in kind.
            #expect(error.file == "\(second)/entry.json" && error.problem.field == "kind")
            #expect(error.description.contains("built-in"), "\(error)")
        }
        try FileManager.default.removeItem(atPath: "\(second)/entry.json")
        do {
            _ = try KindFolders.registry(folders: [first, second])
            Issue.record("a name defined twice must be refused")
        } catch {
            #expect(error.description.contains("\(first)/same.json") && error.description.contains("\(second)/same.json"), "\(error)")
        }
    }

    @Test func aFolderThatCannotBeReadIsThrown() {
        let missing = "/nonexistent-kinds-\(UUID().uuidString)"
        #expect(throws: JobFileError(file: missing, "cannot be read as a folder of kind files")) {
            _ = try KindFolders.registry(folders: [missing])
        }
    }
}
