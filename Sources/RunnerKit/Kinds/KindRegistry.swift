/// Maps kind names to their definitions, in registration order.
public struct KindRegistry: Sendable {
    /// A name registered twice: refused, naming both sources.
    public struct DuplicateKind: Error, CustomStringConvertible {
        /// The kind name registered twice.
        public var name: String
        /// The `source` of the kind registered first: `built-in` or its file's path.
        public var existing: String
        /// The `source` of the kind refused.
        public var added: String
        public var description: String {
            "A job kind named '\(name)' is already defined (\(existing)); \(added) defines it again."
        }
    }

    private var definitions: [String: KindDefinition] = [:]
    private var order: [String] = []

    /// A registry of no kinds; `BuiltInKinds.registry()` in RunnerKinds holds the built-in ones.
    public init() {}

    /// A registry of `definitions`, each registered as `register(_:)` does.
    /// - Throws: `DuplicateKind` or `KindDeclarationError`, as `register(_:)`.
    public init(_ definitions: [KindDefinition]) throws {
        for definition in definitions { try register(definition) }
    }

    /// Adds a kind, once its declaration is checked (`KindDefinition.checkDeclaration()`).
    /// - Throws: `DuplicateKind` for a name registered already; `KindDeclarationError` for a
    ///   kind whose decoder reads a field it does not list, or as another type than listed, or
    ///   never reads one it lists (the kind and the field named).
    public mutating func register(_ definition: KindDefinition) throws {
        if let existing = definitions[definition.name] {
            throw DuplicateKind(name: definition.name, existing: existing.source, added: definition.source)
        }
        try definition.checkDeclaration()
        definitions[definition.name] = definition
        order.append(definition.name)
    }

    /// Registers a compiled kind, whose source is the caller's file (`#fileID`) unless given.
    /// - Throws: as `register(_:)`.
    public mutating func register<Kind: JobKind>(_ kind: Kind.Type, source: String = #fileID) throws {
        try register(KindDefinition(kind, source: source))
    }

    /// The kind registered as `name`; nil when there is none, and a job naming it is refused.
    public func definition(named name: String) -> KindDefinition? { definitions[name] }

    /// The registered kinds, in registration order.
    public var all: [KindDefinition] { order.compactMap { definitions[$0] } }

    /// The registered kinds' names, in registration order.
    public var names: [String] { order }
}
