/// The payloads the fixture server serves, taken from the seeds' data contracts, with the figures
/// tests compare against.
///
/// The tree is the Img.ly `data.json`: an array of nodes, each with a `label` and either `children`
/// (an array of nodes) or an `id` (a leaf). Its figures count as follows:
/// - nodes: every object in the tree, at any level;
/// - leaves: the nodes that have an `id`;
/// - depth: the number of levels, the top-level nodes being at depth 1.
public enum FixtureCatalog {
    // MARK: - Tree

    /// The Img.ly `data.json`, with the structure and values of the seed.
    public static let treeJSON: String = """
        [
          {
            "label": "img.ly",
            "children": [
              {
                "label": "Workspace A",
                "children": [
                  { "id": "imgly.A.1", "label": "Entry 1" },
                  { "id": "imgly.A.2", "label": "Entry 2" },
                  { "id": "imgly.A.3", "label": "Entry 3" }
                ]
              },
              {
                "label": "Workspace B",
                "children": [
                  { "id": "imgly.B.1", "label": "Entry 1" },
                  { "id": "imgly.B.2", "label": "Entry 2" },
                  {
                    "label": "Entry 3",
                    "children": [
                      {
                        "id": "imgly.B.3.1",
                        "label": "Sub-Entry 1"
                      }
                    ]
                  }
                ]
              }
            ]
          },
          {
            "label": "9elements",
            "children": [
              {
                "label": "Workspace A",
                "children": [
                  {
                    "id": "9e.A.1",
                    "label": "Entry 1"
                  },
                  {
                    "id": "9e.A.2",
                    "label": "Entry 2"
                  }
                ]
              }
            ]
          }
        ]

        """

    /// The ids of the tree's leaves, in document order.
    public static let treeLeafIDs: [String] = [
        "imgly.A.1", "imgly.A.2", "imgly.A.3", "imgly.B.1", "imgly.B.2", "imgly.B.3.1", "9e.A.1", "9e.A.2",
    ]

    /// Every object in the tree: 2 roots, 3 workspaces, "Entry 3" of Workspace B, and 8 leaves.
    public static let treeNodeCount = 14

    /// The nodes with an `id`.
    public static let treeLeafCount = 8

    /// img.ly > Workspace B > Entry 3 > Sub-Entry 1.
    public static let treeDepth = 4

    // MARK: - Entries

    /// Leaf ids whose entry answers 404, as some do in the seed.
    public static let missingEntryIDs: Set<String> = ["imgly.B.2", "9e.A.2"]

    /// The entry id whose entry answers 410 Gone.
    public static let goneEntryID = "gone"

    /// Whether `/entries/{id}.json` answers 200 for this id: a leaf of the tree not in `missingEntryIDs`.
    public static func hasEntry(id: String) -> Bool {
        treeLeafIDs.contains(id) && !missingEntryIDs.contains(id)
    }

    /// The entry object for an id, in the seed's shape: `id`, `createdAt`, `createdBy`,
    /// `lastModifiedAt`, `lastModifiedBy`, `description`. The same id always gives the same text.
    public static func entryJSON(id: String) -> String {
        let n = Int(stableHash(id) % 997)
        let authors = ["du@ijdu.cm", "pit@gon.bw", "ha@wu.ly", "sel@ebo.gy"]
        let createdAt = "2023-\(two(1 + n % 12))-\(two(1 + n % 28))T\(two(n % 24)):\(two(n % 60)):47.099Z"
        let modifiedAt = "2024-\(two(1 + (n / 12) % 12))-\(two(1 + (n / 7) % 28))T07:07:40.646Z"
        let description =
            "Entry \(id). Duw orevoza jiprudis faz alnaimu sazafapa cuwpe zifehe kowo wasmag otu tuwulfoj "
            + "bifo se botirgo. Kiojka roftan otecu ohukdu zuaruuze ow ko jogapob naw jadkawwa nem vo fasoz."
        return """
            {
              "id": \(jsonString(id)),
              "createdAt": "\(createdAt)",
              "createdBy": "\(authors[n % authors.count])",
              "lastModifiedAt": "\(modifiedAt)",
              "lastModifiedBy": "\(authors[(n + 1) % authors.count])",
              "description": \(jsonString(description))
            }

            """
    }

    // MARK: - Helpers

    /// A JSON string literal for `text`, quotes included.
    static func jsonString(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// FNV-1a over the bytes: stable across runs and platforms, unlike `Hasher`.
    static func stableHash<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        return hash
    }

    static func stableHash(_ text: String) -> UInt64 {
        stableHash(text.utf8)
    }

    private static func two(_ value: Int) -> String {
        value < 10 ? "0\(value)" : "\(value)"
    }
}
