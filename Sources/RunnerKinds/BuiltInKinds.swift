import RunnerKit

/// The kinds that ship with the runner. Adding a kind: write its file, then add it here.
public enum BuiltInKinds {
    /// The built-in kinds' definitions, in the order `runner kinds` lists them: image, entry, tree,
    /// image-list, json, file.
    public static let all: [KindDefinition] = [
        KindDefinition(ImageKind.self, source: "built-in"),
        KindDefinition(EntryKind.self, source: "built-in"),
        KindDefinition(TreeKind.self, source: "built-in"),
        KindDefinition(ImageListKind.self, source: "built-in"),
        KindDefinition(JSONKind.self, source: "built-in"),
        KindDefinition(FileKind.self, source: "built-in"),
    ]

    /// A registry holding the built-in kinds.
    public static func registry() -> KindRegistry {
        var registry = KindRegistry()
        for kind in all {
            // The built-in names are distinct and their declarations are checked by the tests,
            // so registering them cannot fail.
            do {
                try registry.register(kind)
            } catch {
                preconditionFailure("the built-in kinds do not register: \(error)")
            }
        }
        return registry
    }
}
