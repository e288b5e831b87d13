package dev.microingest.decode;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The declared value fields' paths as one tree, read in a single pass over a JSON value: each node a name or array
 * index along some path, each leaf a field. The reference (codec._found) follows each path on its own through the
 * whole document; here a node's object or array is read once, and a name it does not lead on from is skipped. A
 * later duplicate name replaces the whole value at it, as in Python's dict: entering a node clears the fields below.
 *
 * <p>Refused (the spec is wrong, not a record): a field's path running through another field, two fields at one
 * path, two index steps at one node naming the same element ("1" and "01").
 */
final class PathTree {
  /** A name or index along the paths: a field's slot when one ends here, else the steps leading on. */
  static final class Node {
    final Map<String, Node> byName = new HashMap<>();
    final Map<Integer, Node> byIndex = new HashMap<>();
    boolean onlyIndexes = true; // every step on is an array index (ASCII digits), as codec._INDEX reads one
    int field = -1;
    int[] below = new int[0]; // the fields at or under this node

    boolean isLeaf() {
      return field >= 0;
    }
  }

  final Node root = new Node();

  PathTree(List<RecordSpec.Field> fields, String specText) {
    for (int i = 0; i < fields.size(); i++) {
      RecordSpec.Field field = fields.get(i);
      if (field.source() != RecordSpec.Source.VALUE) {
        continue;
      }
      Node node = root;
      for (String step : field.path()) {
        if (node.isLeaf()) {
          throw refused(field, "runs through another field", specText);
        }
        Node next = node.byName.get(step);
        if (next == null) {
          next = new Node();
          node.byName.put(step, next);
          Integer index = node == root ? null : index(step); // the value itself is an object, never an array
          if (index == null) {
            node.onlyIndexes = false;
          } else if (node.byIndex.putIfAbsent(index, next) != null) {
            throw refused(field, "names an array element another path names", specText);
          }
        }
        node = next;
      }
      if (node.isLeaf() || !node.byName.isEmpty()) {
        throw refused(field, "ends where another field's path is", specText);
      }
      node.field = i;
    }
    collect(root);
  }

  private static int[] collect(Node node) {
    List<Integer> fields = new ArrayList<>();
    if (node.isLeaf()) {
      fields.add(node.field);
    }
    for (Node child : node.byName.values()) {
      for (int f : collect(child)) {
        fields.add(f);
      }
    }
    node.below = fields.stream().mapToInt(Integer::intValue).toArray();
    return node.below;
  }

  /** An index step's number, or null when the step is a name; a number past any array's length is never found. */
  private static Integer index(String step) {
    if (step.isEmpty()) {
      return null;
    }
    long value = 0;
    for (int i = 0; i < step.length(); i++) {
      if (!Ascii.isDigit(step.charAt(i))) {
        return null;
      }
      value = Math.min(value * 10 + (step.charAt(i) - '0'), Integer.MAX_VALUE);
    }
    return (int) value;
  }

  private static IllegalArgumentException refused(RecordSpec.Field field, String why, String specText) {
    return new IllegalArgumentException("field '" + field.name() + "' " + why + " in decoding spec " + specText);
  }
}
