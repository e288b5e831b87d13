-- A masked pipeline's skip kept its note but not the record (no key, value or headers), and before this migration
-- its reason lacked the `withheld: ` mark every withheld dead letter's reason now opens with: a redrive leaves those
-- out (it would read the missing record as a tombstone). A skipped record that had none of the three (a keyless
-- tombstone) would decode no differently.
UPDATE microingest.dead_letters
   SET error_message = 'withheld: ' || error_message
 WHERE error_class = 'skipped' AND record_key IS NULL AND record_value IS NULL AND headers IS NULL
   AND NOT starts_with(error_message, 'withheld: ');
