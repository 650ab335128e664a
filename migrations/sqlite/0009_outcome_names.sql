-- Action outcomes became an enum with snake_case names (the API publishes
-- them as such); rename what earlier versions stored in words.
UPDATE actions SET outcome = 'already_staged' WHERE outcome = 'already staged';
UPDATE actions SET outcome = 'restaged' WHERE outcome = 'restaged empty for a new attempt';
UPDATE actions SET outcome = 'adopted' WHERE outcome = 'adopted the engine''s staging';
UPDATE actions SET outcome = 'already_existed' WHERE outcome = 'already existed';
UPDATE actions SET outcome = 'already_committed' WHERE outcome = 'already committed';
UPDATE actions SET outcome = 'given_up' WHERE outcome = 'given up';
